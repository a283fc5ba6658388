// static/js/core/tpsplit.js: a tensor-parallel lane's step bars on the shared clock, the tooltip's per-layer split and
// the placement line, from records shaped as engine/step.py writes them. `node --test tests/js/`: no browser.
import assert from "node:assert/strict";
import { test } from "node:test";

import { hasSplit, placementLine, splitBars, splitLines } from "../../../static/js/core/tpsplit.js";

const tp = { ms: 100, compute_ms: 30, allreduce_ms: 50, allreduces: 4, forward: "decode", layer_ms: [[14, 24], [15, 25]] };
const idle = { ms: 40, forward: "none" };

test("a step's bar splits its span into compute then all-reduce, in proportion to the step's ms", () => {
  const bars = splitBars([[10, 210], [210, 250]], [tp, idle]);
  assert.deepEqual(bars, [{ step: 1, kind: "compute", x: 10, w: 60, ms: 30 },
    { step: 1, kind: "allreduce", x: 70, w: 100, ms: 50 }]);  // the last 40 px: the driver's share of the step
  assert.equal(hasSplit([idle, tp]), true);
  assert.equal(hasSplit([idle]), false);
});

test("the tooltip says the split, the all-reduce share and each layer's compute + all-reduce", () => {
  const lines = splitLines("TP=2", [tp], 1);
  assert.equal(lines[0], "TP=2 \u00b7 step 1 \u00b7 decode \u00b7 100.0 ms");
  assert.match(lines[1], /compute 30\.0 ms · all-reduce 50\.0 ms \(mean over the ranks: 63% of the forward, 4 all-reduces\)/);
  assert.equal(lines[2], "driver and messages 20.0 ms");
  assert.equal(lines[lines.length - 1], "L0 14.0+24.0  L1 15.0+25.0");
  assert.deepEqual(splitLines("TP=2", [idle], 1), ["TP=2 \u00b7 step 1: no forward split"]);
});

test("the placement line is the statement and its transport; none without one", () => {
  const p = { says: "3 rank processes of 1 thread on 2 cores, one memory domain: oversubscribed",
    transport: "gloo all-reduce over loopback TCP" };
  assert.equal(placementLine(p), `${p.says} \u00b7 gloo all-reduce over loopback TCP`);
  assert.equal(placementLine(undefined), "");
});
