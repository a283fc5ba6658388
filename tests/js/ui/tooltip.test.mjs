// static/js/ui/panels.js's cell tooltip, without a browser: a prefill cell says how much of its prompt's K/V is
// written so far ("prompt K/V written"), and only a lane with a prefix cache says how many tokens came from it
// (issue 20: "prompt tokens cached: 82 of 82" on every lane meant two things). `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { tooltipLines } from "../../../static/js/ui/panels.js";

function prefillHit(options, cell, simulated = false) {
  const record = { step: 1, slots: [cell], ms: 40, forward_ms: 38, forward: "prefill", simulated };
  const lane = { name: "lane", policy: "continuous", config: { name: "lane", policy: "continuous", options },
    timeline: { arrivals: [], starts: [0], ends: [40] } };
  return tooltipLines(lane, { kind: "cell", step: 1, what: { kind: "prefill", request: "R1", cell, record } }, "slots",
    { requests: [{ id: "R1", prompt: "p", max_new_tokens: 4 }] });
}

test("a prefill cell on a lane without a prefix cache says how much K/V is written, never 'cached'", () => {
  const lines = prefillHit({}, { state: "prefill", request: "R1", prefill: [82, 82], token_id: 5, token: "Hi" });
  assert.ok(lines.includes("prompt K/V written so far: 82 of 82 tokens"), lines.join("\n"));
  assert.ok(!lines.some((l) => /cache/i.test(l)), lines.join("\n"));
});

test("a prefill cell on a prefix-cache lane also says how many prompt tokens came from the cache", () => {
  const cell = { state: "prefill", request: "R1", prefill: [82, 82], cached: 48, token_id: 5, token: "Hi" };
  const lines = prefillHit({ prefix_cache: true }, cell);
  assert.ok(lines.includes("prompt K/V written so far: 82 of 82 tokens"), lines.join("\n"));
  assert.ok(lines.includes("from the prefix cache: 48 of 82 tokens (copied, not computed)"), lines.join("\n"));
  const miss = prefillHit({ prefix_cache: true }, { ...cell, cached: 0 });
  assert.ok(!miss.some((l) => /cache/i.test(l)), miss.join("\n"));  // a chunk after the first, or a miss
});

test("a simulated cell's token says it is a SIMULATED word, a model's cell says only the token", () => {
  const cell = { state: "prefill", request: "R1", prefill: [30, 30], token_id: -1, token: "amber" };
  const sim = prefillHit({}, cell, true);
  assert.ok(sim.includes('token: "amber" (id -1), a SIMULATED word: no model ran'), sim.join("\n"));
  const real = prefillHit({}, { ...cell, token_id: 5 }, false);
  assert.ok(real.includes('token: "amber" (id 5)') && !real.some((l) => /SIMULATED/.test(l)), real.join("\n"));
});
