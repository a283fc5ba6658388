// Evictions counted honestly (issue 34): a swap-out is an eviction. swap-vs-recompute on the simulator (its stored run
// in tests/golden/lessons.json, and its swap lane in tests/golden/metrics.json): both lanes evict R3 once, at step 30;
// the page's `preemptions` counts both kinds, `swaps` the swap-outs alone, as engine/report/metrics.py does
// (tests/engine/report/test_evictions.py), and the caption and the narration count them the same way. No browser.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { laneMetrics, mismatches } from "../../../static/js/core/metrics.js";
import { narrate } from "../../../static/js/lanes/narration.js";
import { buildScene, deriveRun } from "../../../static/js/canvas/scene.js";

const read = (name) => JSON.parse(readFileSync(new URL(`../../golden/${name}.json`, import.meta.url), "utf8"));
const CASES = read("metrics");
const stored = read("lessons")["swap-vs-recompute: no noise"];
const records = Object.fromEntries(Object.entries(stored.records).map(([lane, recs]) => [lane, recs.map((r) => ({ ...r, lane }))]));
const run = { id: "swap-vs-recompute", status: "finished", workload: stored.workload, lanes: stored.lanes, records,
  done: Object.fromEntries(stored.lanes.map((l) => [l, true])), promptTokens: stored.prompt_tokens, t: 0 };
const perRequest = (m) => Object.fromEntries(Object.entries(m.requests).map(([id, q]) => [id, q.preemptions]));
const R3_ONCE = { R1: 0, R2: 0, R3: 1, R4: 0, R5: 0, R6: 0 };

test("the swap lane of swap-vs-recompute counts its swap-out as an eviction and as a swap", () => {
  const swapped = (recs) => recs.flatMap((r) => r.slots.filter((c) => c.state === "swapped").map((c) => [r.step, c.request]));
  assert.deepEqual(swapped(records.swap), [[30, "R3"]]);
  const [swap, recompute] = ["swap", "recompute"].map((lane) => laneMetrics(records[lane], stored.workload));
  assert.deepEqual([swap.preemptions, swap.swaps], [1, 1]);  // was 0: the swap lane read as if it evicted nothing
  assert.deepEqual([recompute.preemptions, recompute.swaps], [1, 0]);
  assert.deepEqual(perRequest(swap), R3_ONCE);
  assert.deepEqual(perRequest(recompute), R3_ONCE);
  const golden = laneMetrics(CASES.swap.records, CASES.swap.workload);  // the case both languages are held to
  assert.deepEqual([golden.preemptions, golden.swaps, CASES.swap.expected.preemptions, CASES.swap.expected.swaps], [1, 1, 1, 1]);
});

test("the captions count a swap-out among the evictions and say how many were swap-outs", () => {
  const scene = buildScene(deriveRun(run), { view: "slots", clock: "steps", t: 1e9, focus: null });
  const caption = (name) => scene.lanes.find((l) => l.name === name).caption;
  assert.match(caption("swap"), /\u00b7 1 preempted \(1 swapped out\)$/);
  assert.match(caption("recompute"), /\u00b7 1 preempted$/);
});

test("the narration of step 30 names each lane's eviction by its kind", () => {
  const scene = buildScene(deriveRun(run), { view: "slots", clock: "steps", t: 1e9, focus: null });
  const lanes = scene.lanes.map((l) => ({ name: l.name, policy: l.policy, records: l.records, step: 30, gap: null,
    arrivals: l.timeline.arrivals }));
  const line = narrate(lanes, "steps", 30, false);
  assert.match(line, /recompute: R3 preempted to free KV memory/);
  assert.match(line, /swap: R3 swapped out to the host pool to free KV memory/);
  assert.doesNotMatch(line, /swap: R3 preempted/);
});

test("a run stored before swaps existed is checked without its preemptions, which counted recomputed evictions only", () => {
  const mine = { swap: laneMetrics(CASES.swap.records, CASES.swap.workload) };
  const { swaps, ...stored } = CASES.swap.expected;  // as the server sent it then: no swaps, the swap-out not counted
  assert.equal(swaps, 1);
  assert.deepEqual(mismatches(mine, { swap: { ...stored, preemptions: 0 } }), []);
  assert.deepEqual(mismatches(mine, { swap: { ...CASES.swap.expected, preemptions: 0 } }), ["swap.preemptions"]);
  assert.deepEqual(mismatches(mine, { swap: CASES.swap.expected }), []);
});
