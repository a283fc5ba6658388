// The pipeline-bubbles lesson's claim (lanes/pplesson.js through claims.js): "split into 4 micro-batches ... less of
// each stage is idle" holds where the m = 4 lane's mean measured bubble is below the m = 1 lane's, and where it is not
// the lesson says what the run measured instead; while a lane still runs nothing is claimed either way.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { checkClaims } from "../../../static/js/lanes/claims.js";

const preset = JSON.parse(readFileSync(new URL("../../../demos/pipeline-bubbles.json", import.meta.url), "utf8"));
const claim = preset.claims.filter((c) => c.check === "fewer_bubbles");
const lane = (name, fractions, formula, done = true) => ({ name, done,
  records: fractions.map((f, i) => ({ step: i + 1, bubble_fraction: f, bubble_formula: formula, stage_grid: [[], []] })) });

test("the claim holds where more micro-batches idled the stages less, on the run's own measurements", () => {
  const run = (m4, m1, done = true) => ({ lanes: [lane("PP=2 m=4", m4, 0.2, done), lane("PP=2 m=1", m1, 0.5)], metrics: {} });
  assert.equal(claim.length, 1);
  assert.deepEqual(checkClaims(claim, run([0.3, 0.26], [0.5, 0.51])).map((v) => v.holds), [true]);
  const [no] = checkClaims(claim, run([0.55, 0.55], [0.5, 0.5]));
  assert.equal(no.holds, false);
  assert.match(no.text, /idled 55% of each step \(formula 20%\), no less than PP=2 m=1's 50%/);
  assert.equal(checkClaims(claim, run([0.3], [0.5], false))[0].holds, null);
});
