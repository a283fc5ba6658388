// A fleet's load over time on the page: core/fleetmetrics.js fleetLoads gives each replica's [end ms, load] as
// engine/report/fleet_metrics.py does (the golden fleet case, tests/golden/metrics.json), scene.js hands each replica's
// sub-lane its loads on the fleet's one scale, layout.js gives it a band under its grid, and the legend explains the
// routing marks and the band only where a lane is a fleet. `node --test tests/js/`: no browser.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { loadBars } from "../../../static/js/canvas/cells.js";
import { computeLayout } from "../../../static/js/canvas/layout.js";
import { legendEntries } from "../../../static/js/canvas/legend.js";
import { deriveRun, legendFlags } from "../../../static/js/canvas/scene.js";
import { fleetLoads } from "../../../static/js/core/fleetmetrics.js";

const GOLDEN = JSON.parse(readFileSync(new URL("../../golden/metrics.json", import.meta.url), "utf8"));
const RUNS = JSON.parse(readFileSync(new URL("../../golden/lessons.json", import.meta.url), "utf8"));

function derived(id) {
  const stored = RUNS[id];
  const records = Object.fromEntries(Object.entries(stored.records).map(([lane, recs]) => [lane, recs.map((r) => ({ ...r, lane }))]));
  return deriveRun({ id, status: "finished", workload: stored.workload, lanes: stored.lanes, records,
    done: Object.fromEntries(stored.lanes.map((l) => [l, true])), promptTokens: stored.prompt_tokens, t: 0 });
}

test("fleetLoads gives each replica's load after each of its steps, as the engine's fleet metrics do", () => {
  const { records, expected } = GOLDEN.fleet;
  const loads = fleetLoads(records);
  assert.deepEqual(loads, expected.replicas.map((r) => r.load));
  assert.equal(loads.length, 2);
  assert.ok(loads.every((series) => series.length > 0 && series.some(([, n]) => n > 0)));
});

test("herding: each replica's sub-lane carries its loads per step on one scale; the herded replica holds them all", () => {
  const d = derived("fleet-herding: no noise");
  const [herd, idle] = d.drawn.filter((l) => l.fleet === "guard 64");
  assert.equal(herd.loads.length, herd.records.length);
  assert.equal(herd.loadMax, Math.max(...herd.loads, ...idle.loads));
  assert.equal(Math.max(...herd.loads), 16, "every request on the replica that took the first");
  assert.ok(idle.loads.every((n) => n === 0), "the other replica never took one");
  const [a, b] = d.drawn.filter((l) => l.fleet === "guard 4");
  assert.ok(Math.max(...a.loads) < 16 && Math.max(...b.loads) > 0, "the guard moved some");
  assert.deepEqual(d.drawn.filter((l) => l.fleet === undefined), [], "every lane of this preset is a fleet");
});

test("a replica's load band sits between its grid and its KV bar; a lane of one engine has none", () => {
  const lane = (name, load) => ({ name, rows: ["slot 1", "slot 2"], starts: [0], ends: [10], gaps: [], arrivals: [], load });
  const layout = computeLayout(1280, [lane("fleet/0", true), lane("plain", false)], { view: "slots", clock: "ms", domain: 100 });
  const [replica, plain] = layout.lanes;
  assert.ok(replica.load.h > 0 && replica.load.y > replica.grid.y + replica.grid.h && replica.kv.y > replica.load.y + replica.load.h);
  assert.equal(plain.load.h, 0);
  assert.equal(plain.kv.y - (plain.grid.y + plain.grid.h), replica.load.y - (replica.grid.y + replica.grid.h),
    "the KV bar keeps its gap where there is no band");
});

test("the legend explains the routing marks and the load band where a lane is a fleet, plain arrivals where one is not", () => {
  const labels = (id) => legendEntries(legendFlags(derived(id), { view: "slots", clock: "ms" })).map((e) => e.kind);
  const herding = labels("fleet-herding: no noise");
  assert.ok(herding.includes("routed") && herding.includes("load") && !herding.includes("arrival"), herding.join());
  const mixed = labels("fleet-one-vs-two: no noise");  // two plain engines beside a fleet
  assert.ok(mixed.includes("routed") && mixed.includes("load") && mixed.includes("arrival"), mixed.join());
  const plain = labels("arrivals: no noise");
  assert.ok(!plain.includes("routed") && !plain.includes("load") && plain.includes("arrival"), plain.join());
});

test("a load bar stands on the band's floor, its height the load's share of the fleet's most; a load of 0 has none", () => {
  const band = { x: 100, y: 50, w: 300, h: 18 };
  const bars = loadBars(band, [[100, 110], [110, 130], [130, 130.4]], [0, 8, 16], 16);
  assert.deepEqual(bars.map((b) => [b.step, b.load, b.h]), [[1, 0, 0], [2, 8, 8], [3, 16, 16]]);
  assert.ok(bars.every((b) => b.y + b.h === band.y + band.h), "every bar ends on the floor");
  assert.equal(bars[2].w, 1, "a step narrower than a pixel still shows");
});
