// The tensor-parallel lesson (demos/tensor-parallel.json; static/js/lanes/tplesson.js, core/tpscale.js): its numbers
// filled from the lanes' records and the named model's config, and its claim rewritten where a run contradicts it.
// `node --test tests/js/`: no browser.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { fillLesson } from "../../../static/js/lanes/lesson.js";
import { MODELS, parameters, scaleFigures } from "../../../static/js/core/tpscale.js";

const preset = JSON.parse(readFileSync(new URL("../../../demos/tensor-parallel.json", import.meta.url), "utf8"));
const placement = { cores: 2, memory_domains: 1, says: "3 rank processes of 1 thread on 2 cores, one memory domain: oversubscribed",
  transport: "gloo all-reduce over loopback TCP" };
const step = (ms, split = null) => ({ lane: "x", ms, forward: "decode", slots: [], ...(split || {}) });

function derivedOf(tp1, tp3) {
  const lane = (name, records) => ({ name, done: true, records });
  return { run: { workload: { name: "tensor-parallel", kv_block_size: 16, lanes: [] } },
    lanes: [lane("TP=1", tp1), lane("TP=3", tp3)], metrics: { "TP=1": {}, "TP=3": {} } };
}

test("Llama-3.1-70B's figures come from its config: 70.6 B parameters, 17.6 GB and one KV head a GPU at TP=8", () => {
  const c = MODELS["Llama-3.1-70B"];
  assert.equal((parameters(c) / 1e9).toFixed(1), "70.6");  // the model card's 70.6 B
  const f = scaleFigures(c);
  assert.equal(f.weights_gb_per_device.toFixed(1), "17.6");  // 141.1 GB of bf16 weights over 8
  assert.equal(f.kv_heads_per_device, 1);
  assert.equal(f.kv_kib_per_token_per_device, 2 * 80 * 1 * 128 * 2 / 1024);  // K and V, 80 layers, 1 head of 128, bf16
  assert.equal(f.allreduce_mib_per_token, 2 * 80 * 8192 * 2 / 2 ** 20);      // two all-reduces a layer of one hidden row
});

test("the lesson is filled from the run: the machine, both medians, the all-reduce share and the scale line", () => {
  const tp1 = [step(40), step(42), step(44)];
  // all-reduce 500 of 800 ms of forward: 63%
  const tp3 = [{ ...step(300, { compute_ms: 100, allreduce_ms: 150 }), placement }, step(320, { compute_ms: 110, allreduce_ms: 170 }),
    step(340, { compute_ms: 90, allreduce_ms: 180 })];
  const text = fillLesson(preset.description, preset.name, derivedOf(tp1, tp3), preset.claims);
  assert.match(text, /says where\): 2 cores, one memory domain\. /);
  assert.match(text, /so TP=3 is slower here \(median step 320 ms vs 42 ms\); 63% of its forward is all-reduce\./);
  assert.match(text, /On 8 GPUs, each its own memory, Llama-3\.1-70B \(bf16\) holds 17\.6 GB of weights and 40 KiB of KV a token per GPU, and all-reduces 2\.5 MiB a token\./);
  assert.ok(!text.includes("{") && !text.includes("\u2026"), text);
});

test("a run where TP=3 was not slower has the claim rewritten with its numbers", () => {
  const tp1 = [step(400), step(420)];
  const tp3 = [{ ...step(300, { compute_ms: 100, allreduce_ms: 150 }), placement }];
  const text = fillLesson(preset.description, preset.name, derivedOf(tp1, tp3), preset.claims);
  assert.ok(!text.includes("so TP=3 is slower here"), text);
  assert.match(text, /yet on this run its median step \(300 ms\) was no longer than TP=1's \(410 ms\), not the usual result/);
});
