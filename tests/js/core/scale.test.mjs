// Scale arithmetic beside the toy (issue 38, item 7): bytes a token = 2 x layers x KV heads x head dim x dtype bytes,
// checked against the engine's own pool (a stored run's kv_pool: kv_bytes over its positions) and against published
// model shapes; the memory map's line says it for the pool drawn.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { MODELS, kvBytesPerToken, scaleLine, tokensOnCards } from "../../../static/js/core/scale.js";

test("SmolLM2's bytes a token are what the engine's pool holds a position in", () => {
  const stored = JSON.parse(readFileSync(new URL("../../golden/lessons.json", import.meta.url), "utf8"))["paged-vs-reserve: no noise"];
  for (const recs of Object.values(stored.records)) {
    const pool = recs[0].kv_pool;
    assert.equal(pool.kv_bytes / (pool.num_blocks * pool.block_size), kvBytesPerToken(MODELS.smollm2));
  }
  assert.equal(kvBytesPerToken(MODELS.smollm2), 46080);  // 2 x 30 layers x 3 KV heads x 64 x 4 bytes
});

test("production models: 128 KiB a token for Llama-3.1-8B, 320 KiB for 70B, in bf16", () => {
  assert.equal(kvBytesPerToken(MODELS.llama8b), 128 * 1024);
  assert.equal(kvBytesPerToken(MODELS.llama70b), 320 * 1024);
  assert.equal(tokensOnCards(MODELS.llama8b, 1), Math.floor((80e9 - 16.06e9) / 131072));
  assert.equal(tokensOnCards(MODELS.llama70b, 1), 0);  // 141 GB of weights: not on one 80 GB card
  assert.ok(tokensOnCards(MODELS.llama70b, 2) > 50_000 && tokensOnCards(MODELS.llama70b, 2) < 60_000);
});

test("the memory map's line gives the pool in both models' bytes and what a card holds", () => {
  const line = scaleLine(448);  // paged-vs-reserve's pool: 28 blocks of 16
  assert.match(line, /this pool's 448 tokens take 20\.6 MB of K\/V here \(SmolLM2-135M, float32: 45 KiB a token\)/);
  assert.match(line, /Llama-3\.1-8B in bf16 takes 128 KiB a token, so the same tokens would take 58\.7 MB/);
  assert.match(line, /about 488,000 tokens beside its weights \u2014 238 answers of 2048 tokens/);
  assert.match(line, /Llama-3\.1-70B: 320 KiB a token, about 57,000 tokens on two such cards/);
  assert.equal(scaleLine(0), "");
});
