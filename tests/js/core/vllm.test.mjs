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
