// static/js/lanes/memlesson.js: the memory lessons' measured numbers on hand-made records (batch size, ms per block
// swapped or recomputed) and the claims built on them. No browser.
import assert from "node:assert/strict";
import { test } from "node:test";

import { batchSizes, copyCosts, memoryValue } from "../../../static/js/lanes/memlesson.js";

const cell = (request, state, extra = {}) => ({ request, state, token_id: 1, ...extra });

test("batch size counts the prefill and decode rows of the steps that computed, not padding, idle or waits", () => {
  const records = [
    { step: 1, forward: "prefill", ms: 5, slots: [cell("A", "prefill", { prefill: [4, 4] }), cell("B", "prefill", { prefill: [3, 3] })] },
    { step: 2, forward: "decode", ms: 2, slots: [cell("A", "decode"), cell("B", "padding"), cell(null, "idle")] },
    { step: 3, forward: "none", ms: 2, slots: [cell(null, "idle")] },
  ];
  assert.deepEqual(batchSizes(records), { mean: 1.5, max: 2 });
  assert.equal(memoryValue({ records }, {}, "batch_mean", 16), "1.5");
  assert.equal(memoryValue({ records }, { token_utilization: 0.567 }, "token_use", 16), "57%");
  assert.equal(memoryValue({ records }, {}, "tokens", 16), undefined);  // not a memory key: lesson.js's own
});

test("a swap's blocks are counted out and back in from kv_swapped, and cost the steps' copy_ms", () => {
  const records = [
    { step: 1, forward: "decode", ms: 3, copy_ms: 0.6, kv_swapped: { B: 3 }, slots: [cell("B", "swapped")] },
    { step: 2, forward: "decode", ms: 2, slots: [] },
    { step: 3, forward: "decode", ms: 3, copy_ms: 0.6, kv_swapped: { B: 0 }, slots: [] },
  ];
  const c = copyCosts(records, 16);
  assert.equal(c.swapBlocks, 6);
  assert.ok(Math.abs(c.swapMs - 1.2) < 1e-12);
  assert.equal(memoryValue({ records }, {}, "swap_ms_per_block", 16), "0.20");
  assert.equal(memoryValue({ records }, {}, "swapped_blocks", 16), "6");
});

test("a recompute's blocks are the tokens a preempted request reads again, at its step's time over a decode step", () => {
  const records = [
    { step: 1, forward: "decode", ms: 2, slots: [cell("A", "decode")] },
    { step: 2, forward: "decode", ms: 2, slots: [cell("B", "preempted", { token_id: null })] },
    // B reads 32 tokens again beside C's 32 new ones: half of the 10 ms over the 2 ms decode step is B's
    { step: 3, forward: "split", ms: 12, slots: [cell("B", "prefill", { prefill: [32, 32] }), cell("C", "prefill", { prefill: [32, 32] })] },
  ];
  const c = copyCosts(records, 16);
  assert.equal(c.recomputeBlocks, 2);
  assert.equal(c.recomputeMs, 5);
  assert.equal(memoryValue({ records }, {}, "recompute_ms_per_block", 16), "2.50");
  assert.equal(memoryValue({ records: records.slice(0, 2) }, {}, "recompute_ms_per_block", 16), null);  // none yet
});

// The memory lessons on the simulator's runs of their presets (tests/golden/lessons.json, `python -m tests.golden.lessons`):
// every fill-in known, every claim borne out, and the sentences state the run's own numbers.
import { readFileSync } from "node:fs";

import { NOT_THIS_RUN, checkClaims } from "../../../static/js/lanes/claims.js";
import { fillLesson, lessonParts } from "../../../static/js/lanes/lesson.js";
import { deriveRun } from "../../../static/js/canvas/scene.js";

const RUNS = JSON.parse(readFileSync(new URL("../../golden/lessons.json", import.meta.url), "utf8"));
const demo = (name) => JSON.parse(readFileSync(new URL(`../../../demos/${name}.json`, import.meta.url), "utf8"));
const MEMORY = ["paged-vs-reserve", "swap-vs-recompute"];

function derivedOf(stored, id) {
  const records = Object.fromEntries(Object.entries(stored.records).map(([lane, recs]) => [lane, recs.map((r) => ({ ...r, lane }))]));
  return deriveRun({ id, status: "finished", workload: stored.workload, lanes: stored.lanes, records,
    done: Object.fromEntries(stored.lanes.map((l) => [l, true])), promptTokens: stored.prompt_tokens, t: 0 });
}

for (const [id, stored] of Object.entries(RUNS).filter(([, s]) => MEMORY.includes(s.preset))) {
  test(`the ${id} lesson states its run's numbers and its claims hold`, () => {
    const d = demo(stored.preset);
    const derived = derivedOf(stored, id);
    const text = fillLesson(stored.description, stored.preset, derived, d.claims);
    assert.ok(!text.includes("\u2026") && !text.includes("{"), `${id}: every fill-in is known:\n${text}`);
    const m = derived.metrics;
    const verdicts = checkClaims(d.claims, derived);
    for (const c of verdicts) assert.equal(c.holds, c.says !== "and finishes no later" || m.swap.wall_s <= m.recompute.wall_s, `${id}: ${c.says}`);
    for (const c of d.claims.filter((_, i) => verdicts[i].holds)) assert.ok(text.includes(c.says), `${id}: ${c.says}`);
    if (stored.preset === "paged-vs-reserve") {
      for (const lane of ["paged", "reserve"]) {
        assert.ok(text.includes(`${Math.round(m[lane].token_utilization * 100)}%`), `${id}: ${lane}'s token utilization`);
        assert.ok(text.includes(`${batchSizes(derived.lanes.find((l) => l.name === lane).records).mean.toFixed(1)}`));
      }
      assert.ok(m.paged.token_utilization > 0.85 && m.reserve.token_utilization < 0.7, `${id}: the gap the lesson is about`);
      assert.ok(text.includes("20.4-38.2%") && text.includes("96%"), "the paper's figures beside the measured ones");
    } else {
      const swap = copyCosts(derived.lanes.find((l) => l.name === "swap").records, 16);
      const again = copyCosts(derived.lanes.find((l) => l.name === "recompute").records, 16);
      assert.ok(swap.swapBlocks > 0 && again.recomputeBlocks > 0, `${id}: both lanes preempted`);
      assert.ok(text.includes(`${(swap.swapMs / swap.swapBlocks).toFixed(2)} ms a block`), text);
      assert.ok(text.includes(`${(again.recomputeMs / again.recomputeBlocks).toFixed(2)} ms a block`), text);
      assert.ok(text.includes("same DRAM"), "a CPU's host pool is said to be the same memory");
      assert.equal(m.swap.tokens, m.recompute.tokens);
      // what the flags and captions show (issue 38): both kinds of eviction, counted as the table counts them
      assert.ok(m.swap.swaps > 0 && m.recompute.preemptions - m.recompute.swaps > 0, `${id}: both kinds of eviction`);
      assert.ok(text.includes(`(recompute ${m.recompute.preemptions}, swap ${m.swap.swaps})`), text);
    }
  });
}

test("swap-vs-recompute's lesson says which claim its run bore out: a swap lane that finished later is marked, the cheaper copy stands (issue 38)", () => {
  const stored = RUNS["swap-vs-recompute: swap's steps x1.2"];
  const derived = derivedOf(stored, "slow swap");
  const m = derived.metrics;
  assert.ok(m.swap.wall_s > m.recompute.wall_s, "the forced noise made swap finish later");
  const d = demo("swap-vs-recompute");
  const held = Object.fromEntries(checkClaims(d.claims, derived).map((c) => [c.says, c.holds]));
  assert.deepEqual(held, { "Both lanes evict a request": true, "Copying a block costs less than recomputing it": true,
    "so swap loses less time to preemption": true, "and finishes no later": false });
  const { text, details } = lessonParts(stored.description, stored.preset, derived, d.claims);
  assert.ok(text.includes(`and finishes no later ${NOT_THIS_RUN}`), text);
  assert.equal(details.length, 1);
  assert.ok(details[0].includes(`${m.swap.wall_s.toFixed(2)} s`) && details[0].includes(`recompute (${m.recompute.wall_s.toFixed(2)} s`), details[0]);
});
