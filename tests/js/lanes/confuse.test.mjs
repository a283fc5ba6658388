// What confuses a class, explained where it shows: continuous's higher mean TPOT (the narration once every lane is
// done), step arrivals on the ms clock (each lane's mark at its own step start), and the glossary's words for both.
import assert from "node:assert/strict";
import { test } from "node:test";

import { define } from "../../../static/js/core/glossary.js";
import { narrate, tpotNote } from "../../../static/js/lanes/narration.js";
import { laneTimeline } from "../../../static/js/core/timeline.js";

function record(n, ms, startMs) {
  return { step: n, slots: [{ state: "decode", request: "A", token_id: 1, token: "x" }], admitted: n === 1 ? ["A"] : [],
    returned: [], finished: [], waiting: [], preempted: [], forward: "decode", ms, start_ms: startMs,
    kv_used: 1, kv_capacity: 8, kv_blocks_used: 0, kv_blocks_total: 0 };
}

const steps = (ms) => [1, 2, 3, 4].map((n) => record(n, ms, ms * (n - 1)));

test("a step arrival's mark sits at the start of that step on each lane's own ms clock", () => {
  const workload = { requests: [{ id: "A", arrival: 0 }, { id: "B", arrival: 2 }] };
  const fast = laneTimeline(steps(100), workload);
  const slow = laneTimeline(steps(300), workload);
  const at = (timeline, id) => timeline.arrivals.find((a) => a.id === id);
  assert.equal(at(fast, "B").arrival_ms, 200);   // step 3 of the fast lane starts at 200 ms
  assert.equal(at(slow, "B").arrival_ms, 600);   // ... of the slow lane at 600 ms: one request, two times
  assert.equal(at(fast, "B").arrival, 2);
  assert.equal(at(slow, "B").arrival, 2);       // on the steps clock both marks sit at the same step
  assert.match(define("arrival").text, /each lane's own clock/);
});

const done = (name, policy, tpot) => ({ name, policy, records: [record(1, 10, 0)], step: 2, gap: null, ended: true, arrivals: [],
  metrics: { mean_tpot_ms: tpot } });

test("continuous's higher mean TPOT is explained once the lanes are done: joins slow the shared steps", () => {
  const note = tpotNote([done("static", "static", 104), done("continuous", "continuous", 169)]);
  assert.match(note, /continuous's mean TPOT \(169 ms\) is above static's \(104 ms\)/);
  assert.match(note, /slower for every decoding request they share/);
  assert.equal(tpotNote([done("static", "static", 200), done("continuous", "continuous", 169)]), "");
  const line = narrate([done("static", "static", 104), done("continuous", "continuous", 169)], "steps", 2, false);
  assert.match(line, /joins are prefilled/);
  assert.doesNotMatch(narrate([done("static", "static", 104), done("continuous", "continuous", 169)], "steps", 2, false,
    false, true), /joins/);  // predict-then-reveal: nothing of the totals
  assert.match(define("tpot").text, /slower for every decoding request it shares/);
});

test("a fixed-length request's text past EOS says why it runs on into a new turn", async () => {
  const { pastEosNote } = await import("../../../static/js/ui/panels.js");
  const cells = [{ token: "Paris.", special: false }, { token: "<|im_end|>", special: true }, { token: "system", special: false }];
  assert.match(pastEosNote({ ignore_eos: true }, cells), /ignores EOS.*new chat turn/);
  assert.equal(pastEosNote({ ignore_eos: false }, cells), "");
  assert.equal(pastEosNote({ ignore_eos: true }, cells.slice(0, 1)), "");
});

test("the TPOT note shows on the page's own last frame: the playhead stops at the longest lane's end", async () => {
  const { readFileSync } = await import("node:fs");
  const { buildScene, deriveRun } = await import("../../../static/js/canvas/scene.js");
  const { extent } = await import("../../../static/js/core/playback.js");
  const stored = JSON.parse(readFileSync(new URL("../../golden/lessons.json", import.meta.url), "utf8"))["arrivals: no noise"];
  const records = Object.fromEntries(Object.entries(stored.records).map(([lane, recs]) => [lane, recs.map((r) => ({ ...r, lane }))]));
  const run = { id: "arrivals", status: "finished", workload: stored.workload, lanes: stored.lanes, records,
    done: Object.fromEntries(stored.lanes.map((l) => [l, true])), promptTokens: stored.prompt_tokens, t: 0 };
  const derived = deriveRun(run);
  for (const clock of ["steps", "ms"]) {
    const limit = extent(derived.lanes.map((l) => ({ end: l.timeline.end, starts: l.timeline.starts, done: l.done })), clock);
    const scene = buildScene(derived, { view: "slots", clock, t: limit, focus: null });
    const longest = scene.lanes.find((l) => l.step === l.records.length);  // it never reads one past its last step
    assert.ok(longest && scene.lanes.every((l) => l.ended), clock);
    const lanes = scene.lanes.map((l) => ({ name: l.name, policy: l.policy, records: l.records, step: l.step, gap: l.gap,
      ended: l.ended, arrivals: l.timeline.arrivals, metrics: l.metrics, workload: stored.workload }));
    assert.notEqual(tpotNote(lanes), "", clock);   // this run shows the effect: continuous's mean TPOT above static's
    assert.ok(narrate(lanes, clock, limit, false, true).endsWith(tpotNote(lanes)), clock);
    assert.ok(!narrate(lanes, clock, limit, false, true, false, true).includes(tpotNote(lanes)), clock);  // Present: short
    const before = buildScene(derived, { view: "slots", clock, t: limit * 0.9, focus: null });
    assert.ok(!before.lanes.every((l) => l.ended), clock);
  }
});
