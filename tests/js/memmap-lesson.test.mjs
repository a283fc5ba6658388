// static/js/memlesson.js: the memory lessons' measured numbers on hand-made records (batch size, ms per block
// swapped or recomputed) and the claims built on them. No browser.
import assert from "node:assert/strict";
import { test } from "node:test";

import { batchSizes, copyCosts, memoryValue } from "../../static/js/memlesson.js";

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
