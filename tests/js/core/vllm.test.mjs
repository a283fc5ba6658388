// The vLLM lane on the page, without a browser: a workload's vLLM lane (with or without its policy) is a continuous
// lane titled as a real vLLM engine, stacked with the continuous lanes.
import assert from "node:assert/strict";
import { test } from "node:test";

import { laneConfig, laneTitle, orderLanes } from "../../../static/js/core/laneconfig.js";

test("a vLLM lane is continuous batching by a real vLLM engine, with the options it set", () => {
  for (const entry of [{ name: "vLLM", engine: "vllm" }, { name: "vLLM", engine: "vllm", policy: "continuous" }]) {
    const c = laneConfig(entry);
    assert.equal(c.policy, "continuous");
    assert.equal(laneTitle(c), "vLLM \u2014 continuous, a real vLLM engine");
  }
  const chunked = laneConfig({ name: "vLLM 64", engine: "vllm", policy: "continuous", max_batch_tokens: 64 });
  assert.equal(laneTitle(chunked), "vLLM 64 \u2014 continuous, a real vLLM engine, 64 tokens/step");
  const configs = Object.fromEntries([laneConfig({ name: "vLLM", engine: "vllm", policy: "continuous" }),
    laneConfig("static"), laneConfig("continuous")].map((c) => [c.name, c]));
  assert.deepEqual(orderLanes(["vLLM", "static", "continuous"], configs), ["static", "vLLM", "continuous"]);
});

test("a vLLM preset is refused, with why, where the server says vLLM is not installed (issue 38)", async () => {
  const { presetProblem } = await import("../../../static/js/lanes/status.js");
  const vllm = { name: "vllm", lanes: [{ name: "continuous", policy: "continuous" }, { name: "vLLM", engine: "vllm" }] };
  const mixed = { name: "mixed", lanes: [{ name: "static", policy: "static" }] };
  const missing = { vllm: false, vllm_problem: "needs vLLM, which is not installed here: pip install vllm" };
  assert.equal(presetProblem(vllm, missing),
    "Not available on this server: its vLLM lane needs vLLM, which is not installed here: pip install vllm.");
  assert.equal(presetProblem(mixed, missing), null);
  assert.equal(presetProblem(vllm, { vllm: true }), null);
  assert.equal(presetProblem(vllm, {}), null);  // before the model's status: nothing known, nothing refused
});
