// A class's poll on the page (issue 38): the tally in words, a student's own answer, and the reveal's line — the
// class's tally beside the run's own figure, read from the run's metrics (the page's, from the step records).
import { test } from "node:test";
import assert from "node:assert/strict";
import { FIGURES, answeredText, revealText, runAnswer, tallyText, yoursText } from "../../../static/js/lanes/poll.js";
import { metricOf } from "../../../static/js/core/columns.js";

// the mixed preset's figures on 4 slots (docs/teaching.md): static 15 steps, continuous 9; mean TTFT 5.0 / 2.375
const MIXED = { static: { steps: 15, mean_ttft_steps: 5, slot_use: 0.48 }, continuous: { steps: 9, mean_ttft_steps: 2.375, slot_use: 0.81 } };
const FIRST = { id: 1, kind: "choice", question: "Which lane finishes first?", choices: ["static", "continuous"],
  figure: { metric: "steps" }, tally: { answered: 3, counts: [1, 2] } };
const TTFT = { id: 2, kind: "number", question: "continuous's mean TTFT in steps?", choices: [],
  figure: { metric: "mean_ttft_steps", lane: "continuous" },
  tally: { answered: 3, median: 3, q1: 2.75, q3: 3.5, low: 2.5, high: 4 } };

test("every figure a teacher may pick is a metric of the page's table", () => {
  for (const key of FIGURES) assert.ok(metricOf(key), key);
});

test("the tally says what the class answered, never who", () => {
  assert.equal(tallyText(FIRST), "static 1 \u00b7 continuous 2");
  assert.equal(answeredText(FIRST, 3), "3 of 3 students answered");
  assert.equal(answeredText({ ...FIRST, tally: { answered: 0, counts: [0, 0] } }, 1), "0 of 1 student answered");
  assert.equal(tallyText(TTFT), "median 3 (middle half 2.75\u20133.5, all 2.5\u20134)");
  assert.equal(tallyText({ ...TTFT, tally: { answered: 0 } }), "no answers yet");
  assert.equal(tallyText({ ...FIRST, tally: undefined }), "");          // a student's view while answers are open
  assert.equal(yoursText({ ...FIRST, yours: 1 }), "continuous");
  assert.equal(yoursText({ ...TTFT, yours: 2.375 }), "2.38");
  assert.equal(yoursText({ ...TTFT, yours: null }), "");
});

test("a choice poll's answer is the lane with the best figure, and the reveal counts who named it", () => {
  assert.deepEqual(runAnswer(FIRST, MIXED), { text: "continuous first by steps: 9 steps (static 15 steps)", lanes: ["continuous"] });
  assert.deepEqual(revealText(FIRST, MIXED), { answer: "The run: continuous first by steps: 9 steps (static 15 steps)",
    right: "2 of 3 answered continuous", lanes: ["continuous"] });
  const busiest = runAnswer({ ...FIRST, figure: { metric: "slot_use" } }, MIXED);   // higher is better: the most
  assert.deepEqual(busiest.lanes, ["continuous"]);
  assert.match(busiest.text, /^continuous first by slot use: 81% \(static 48%\)$/);
  const same = { static: { steps: 8 }, continuous: { steps: 8 } };                  // the `same` preset: a tie
  assert.deepEqual(runAnswer(FIRST, same), { text: "a tie between static and continuous by steps: 8 steps", lanes: ["static", "continuous"] });
  assert.equal(revealText(FIRST, same).right, "3 of 3 answered static or continuous");
});

test("a number poll's answer is its lane's figure; a missing figure says so rather than showing a number", () => {
  assert.deepEqual(runAnswer(TTFT, MIXED), { text: "continuous's mean TTFT: 2.375 steps", value: 2.375 });
  assert.deepEqual(revealText(TTFT, MIXED), { answer: "The run: continuous's mean TTFT: 2.375 steps", right: "", lanes: null });
  assert.equal(runAnswer({ ...TTFT, figure: { metric: "steps", lane: "chunked" } }, MIXED).text,
    "this run has no steps for \u201cchunked\u201d");
  assert.equal(runAnswer({ ...TTFT, figure: { metric: "no_such" } }, MIXED).text, "this page has no figure \u201cno_such\u201d");
  assert.equal(runAnswer({ ...TTFT, figure: null }, MIXED), null);
  assert.equal(revealText({ ...TTFT, figure: null }, MIXED).answer, "The run: no figure was named for this question");
});
