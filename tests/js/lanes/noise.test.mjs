// The noise line (static/js/lanes/noise.js): the run's step-time spread in words next to the ms figures, a warning above
// NOISY, a simulated run saying it has no noise, and the worst outlier step named from the records.
import assert from "node:assert/strict";
import { test } from "node:test";

import { NOISY, noiseLine, outlierClause, renderTagline, worstStep } from "../../../static/js/lanes/noise.js";

const lane = (spread, simulated = false) => ({ step_time_spread: spread, simulated });

test("a measured run says how much its step times varied, the largest lane's spread, with the warm-up's", () => {
  const line = noiseLine({ a: lane(0.04), b: lane(0.12) }, 0.07);
  assert.equal(line.text, "Step times varied \u00b112% on this machine during the run (\u00b17% in the warm-up's repeated steps).");
  assert.equal(line.tone, "");
});

test("above NOISY the line warns, and a run with no repeated shape falls back on the warm-up's figure", () => {
  assert.equal(NOISY, 0.25);
  const noisy = noiseLine({ a: lane(0.4) }, null);
  assert.equal(noisy.tone, "warn");
  assert.match(noisy.text, /^Step times varied \u00b140% on this machine during the run\. For the lesson: a claim about time/);
  assert.equal(noiseLine({ a: lane(0.25) }).tone, "", "the threshold itself is not a warning");
  assert.match(noiseLine({ a: lane(7.65) }).text, /^Step times varied up to 8\.7x on this machine during the run\. For the lesson: a claim about time/);
  const early = noiseLine({ a: lane(null) }, 0.3);
  assert.equal(early.tone, "warn");
  assert.match(early.text, /no step shape has repeated yet \(\u00b130% in the warm-up/);
});

test("a simulated run says it has no noise; no run, no line", () => {
  assert.equal(noiseLine({ a: lane(0, true), b: lane(0, true) }).text,
    "Simulated run: its step times come from a cost model, so they have no noise.");
  assert.deepEqual(noiseLine({}), { text: "", tone: "" });
});

test("the worst step is the one furthest above the median of its shape's steps", () => {
  const decode = (step, ms) => ({ step, ms, forward: "decode", slots: [{ state: "decode", request: "R1" }] });
  const records = [decode(1, 100), decode(2, 110), decode(3, 400), decode(4, 100),
    { step: 5, ms: 900, forward: "prefill", slots: [{ state: "prefill", request: "R2", prefill: [50, 50] }] }];
  assert.deepEqual(worstStep(records), { step: 3, ms: 400, median: 100, ratio: 4 });  // the lone prefill has no peers
  assert.equal(outlierClause(records), "step 3 took 400 ms, 4.0 x the 100 ms median of the steps that did the same work");
  assert.equal(outlierClause(records.slice(0, 2)), "", "within NOISY of the median: nothing stands out");
});

test("the warning says what the noise means for the lesson: time claims may fail, step counts hold (issue 38)", () => {
  const { text } = noiseLine({ a: lane(0.49) }, null);
  assert.match(text, /For the lesson: a claim about time \(which lane finishes first, how long a wait or a first token takes\) may fail/);
  assert.match(text, /step counts and tokens still hold\. Run it again, or play the reference run\.$/);
});

test("the tagline claims the real model only where a lane of the run is not simulated", () => {
  const node = { textContent: "Every filled cell below is a row the real model computed.", dataset: { simulated: "SIMULATED run." } };
  renderTagline(node, { a: lane(null, true), b: lane(null, true) });
  assert.equal(node.textContent, "SIMULATED run.");
  renderTagline(node, { a: lane(0.1, false) });
  assert.equal(node.textContent, "Every filled cell below is a row the real model computed.");
  renderTagline(node, {});   // no run yet: the page's own words
  assert.equal(node.textContent, "Every filled cell below is a row the real model computed.");
});
