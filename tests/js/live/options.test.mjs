// The Live view's lane options panel says how the live lane batches, from the snapshot's `options`
// (engine.live.LiveLane.options). `node --test tests/js/`: no browser.
import assert from "node:assert/strict";
import { test } from "node:test";

import { optionTexts } from "../../../static/js/live/panels.js";
import { applyLiveEvent, createLiveState } from "../../../static/js/live/state.js";

const OPTIONS = { slots: 8, max_batch_tokens: 256, chunk_size: 64, fused: true, prefix_cache: true, kv_blocks: 256,
  kv_block_size: 16, kv_bytes: 256 * 16 * 46080 };

test("the options panel names the budget, the chunk, the fused step, the prefix cache and the KV pool", () => {
  assert.deepEqual(optionTexts(OPTIONS), { slots: "8", budget: "256 tokens", chunk: "64 tokens",
    fused: "one forward a step", prefix: "on", kv: "256 blocks of 16 \u00b7 180 MiB" });
  const off = optionTexts({ ...OPTIONS, max_batch_tokens: null, chunk_size: null, fused: false });
  assert.equal(off.budget, "no cap");
  assert.equal(off.chunk, "whole prompt");
  assert.equal(off.fused, "prefill call + decode call");
  assert.equal(optionTexts(null).chunk, "\u2013");
});

test("a live snapshot's options reach the state's lane", () => {
  const state = applyLiveEvent(createLiveState(), { type: "live_snapshot", at: 0,
    payload: { ready: true, slots: 8, options: OPTIONS, now_ms: 0, started_at: 0, records: [], requests: [] } });
  assert.deepEqual(state.lane.options, OPTIONS);
});
