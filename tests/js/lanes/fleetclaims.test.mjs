// The fleet presets' claims (static/js/lanes/claims.js balances_load, first_tokens_soonest) say what happened when a
// run contradicts them: the stored simulated runs of fleet-herding and fleet-one-vs-two (tests/golden/lessons.json)
// with each claim turned on the lane that does not bear it out. `node --test tests/js/`: no browser.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { checkClaims } from "../../../static/js/lanes/claims.js";
import { fillLesson } from "../../../static/js/lanes/lesson.js";
import { deriveRun } from "../../../static/js/canvas/scene.js";

const RUNS = JSON.parse(readFileSync(new URL("../../golden/lessons.json", import.meta.url), "utf8"));
const demo = (name) => JSON.parse(readFileSync(new URL(`../../../demos/${name}.json`, import.meta.url), "utf8"));

function derived(id) {
  const stored = RUNS[id];
  const records = Object.fromEntries(Object.entries(stored.records).map(([lane, recs]) => [lane, recs.map((r) => ({ ...r, lane }))]));
  return deriveRun({ id, status: "finished", workload: stored.workload, lanes: stored.lanes, records,
    done: Object.fromEntries(stored.lanes.map((l) => [l, true])), promptTokens: stored.prompt_tokens, t: 0 });
}

test("fleet-herding: the guard of 4 balances better than the default guard; turned around, the claim states both imbalances", () => {
  const d = derived("fleet-herding: no noise");
  const [claim] = demo("fleet-herding").claims;
  assert.equal(checkClaims([claim], d)[0].holds, true);
  const backwards = { ...claim, lane: claim.others[0], others: [claim.lane] };
  const [verdict] = checkClaims([backwards], d);
  const [g64, g4] = [d.metrics["guard 64"], d.metrics["guard 4"]];
  assert.equal(verdict.holds, false);
  assert.equal(verdict.text, `yet on this run its load imbalance (${g64.mean_load_imbalance.toFixed(2)} on average) was no lower`
    + ` than guard 4's (${g4.mean_load_imbalance.toFixed(2)}), not the usual result`);
  assert.ok(g64.mean_load_imbalance > 4 * g4.mean_load_imbalance, "the herd: one replica holds them all");
});

test("fleet-one-vs-two: two replicas' first tokens come soonest; turned around, the claim names each lane that was sooner", () => {
  const d = derived("fleet-one-vs-two: no noise");
  const [claim] = demo("fleet-one-vs-two").claims;
  assert.equal(checkClaims([claim], d)[0].holds, true);
  const backwards = { ...claim, lane: "4 slots", others: ["8 slots", "2 × 4"] };
  const text = fillLesson(RUNS["fleet-one-vs-two: no noise"].description, "fleet-one-vs-two", d, [backwards]);
  const ms = (lane) => Math.round(d.metrics[lane].mean_ttft_ms);
  assert.ok(!text.includes(claim.says), text);
  assert.ok(text.includes(`yet on this run its mean TTFT (${ms("4 slots")} ms) was no better than 8 slots's (${ms("8 slots")} ms)`
    + ` and 2 × 4's (${ms("2 × 4")} ms), not the usual result (`), text);
  assert.equal(checkClaims([{ ...claim, others: [] }], d)[0].holds, null, "a claim with no others is not checked");
});

test("a lesson writes a mean time in whole milliseconds, any other number with 2 decimals", () => {
  const d = derived("fleet-one-vs-two: no noise");
  const m = d.metrics["2 × 4"];
  const text = fillLesson("{2 × 4.mean_ttft_ms} / {2 × 4.p95_ttft_ms} / {2 × 4.wall_s}", "fleet-one-vs-two", d);
  assert.equal(text, `${Math.round(m.mean_ttft_ms)} / ${m.p95_ttft_ms.toFixed(2)} / ${m.wall_s.toFixed(2)}`);
});
