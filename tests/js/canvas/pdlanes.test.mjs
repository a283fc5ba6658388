// A P/D lane on the page, without a browser: canvas/pdlanes.js draws its engines as sub-lanes by role, a decode
// engine's marks are its hand-offs (each at its copy's end, with the copy), the legend explains the copy only where
// a lane is a P/D lane, the tooltip and the P/D table say the copy's blocks, bytes and ms, and the preset's claims
// (lanes/pdlesson.js) say what happened when turned around. Records: the golden `pd` case (tests/golden/metrics.json)
// and the stored simulated runs of pd-vs-colocated (tests/golden/lessons.json). `node --test tests/js/`.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { legendEntries } from "../../../static/js/canvas/legend.js";
import { stepSpan } from "../../../static/js/canvas/layout.js";
import { handoffLines, readyMs, transferBand } from "../../../static/js/canvas/pdlanes.js";
import { deriveRun, legendFlags } from "../../../static/js/canvas/scene.js";
import { pdTransfers, transferLine } from "../../../static/js/core/pdmetrics.js";
import { checkClaims } from "../../../static/js/lanes/claims.js";
import { pdValue } from "../../../static/js/lanes/pdlesson.js";
import { tooltipLines } from "../../../static/js/ui/panels.js";
import { partsText, pdCell } from "../../../static/js/ui/pdtable.js";

const CASE = JSON.parse(readFileSync(new URL("../../golden/metrics.json", import.meta.url), "utf8")).pd;
const RUNS = JSON.parse(readFileSync(new URL("../../golden/lessons.json", import.meta.url), "utf8"));
const DEMO = JSON.parse(readFileSync(new URL("../../../demos/pd-vs-colocated.json", import.meta.url), "utf8"));

function golden() {
  return deriveRun({ id: "pd", status: "finished", workload: CASE.workload, lanes: [CASE.lane], laneConfigs: CASE.workload.lanes,
    records: { [CASE.lane]: CASE.records }, done: { [CASE.lane]: true }, t: 0 });
}

function stored(id) {
  const s = RUNS[id];
  const records = Object.fromEntries(Object.entries(s.records).map(([lane, recs]) => [lane, recs.map((r) => ({ ...r, lane }))]));
  return deriveRun({ id, status: "finished", workload: s.workload, lanes: s.lanes, records,
    done: Object.fromEntries(s.lanes.map((l) => [l, true])), promptTokens: s.prompt_tokens, t: 0 });
}

test("a P/D lane is drawn as its prefill and decode engines, labelled by role, each from its own records", () => {
  const d = golden();
  assert.deepEqual(d.drawn.map((l) => [l.name, l.title, l.pd.role]), [
    ["P/D 1+1/prefill0", "P/D 1+1 \u00b7 prefill engine 1 of 1", "prefill"],
    ["P/D 1+1/decode0", "P/D 1+1 \u00b7 decode engine 1 of 1", "decode"]]);
  const [p, dec] = d.drawn;
  assert.equal(p.records.length, CASE.records.filter((r) => r.replicas[0]).length);
  assert.equal(dec.records.length, CASE.records.filter((r) => r.replicas[1]).length);
  assert.ok(dec.records.every((r) => r.slots.every((c) => c.state !== "prefill")), "a decode engine runs decode rows only");
  assert.deepEqual(p.timeline.arrivals.map((a) => a.id).sort(), ["D1", "D2", "D3", "L1", "L2"]);
});

test("a decode engine's marks are its hand-offs: each where its copy ended, carrying the copy the record holds", () => {
  const d = golden();
  const moved = pdTransfers(CASE.records);
  assert.equal(moved.length, 5);
  const marks = d.drawn[1].timeline.arrivals;
  for (const t of moved) {
    const mark = marks.find((a) => a.id === t.request);
    assert.equal(mark.arrival_ms, readyMs(t));
    assert.equal(mark.transfer.bytes, t.bytes);
    assert.equal(mark.transfer.blocks * 737280, t.bytes, "bytes = blocks x SmolLM2's bytes per block");
  }
  const band = transferBand((ms) => ms / 10, { y: 5, h: 11 }, { start_ms: 400, ms: 0.45 });
  assert.deepEqual(band, { x: 40, y: 5, w: 3, h: 11 }, "a copy shorter than a pixel still shows, 3 px wide");
  assert.equal(transferBand((ms) => ms, { y: 0, h: 11 }, { start_ms: 100, ms: 20 }).w, 20);
});

test("the legend explains the KV copy only where a lane is a P/D lane; a P/D lane is no fleet's routing", () => {
  const flags = legendFlags(golden(), { view: "slots", clock: "ms" });
  assert.equal(flags.pd, true);
  assert.equal(flags.fleet, false);
  const terms = legendEntries(flags).map((e) => e.term);
  assert.ok(terms.includes("transfer") && !terms.includes("routed") && !terms.includes("replica_load"), terms.join());
  const plain = stored("fleet-herding: no noise");
  assert.ok(!legendEntries(legendFlags(plain, { view: "slots", clock: "ms" })).some((e) => e.term === "transfer"));
});

test("a hand-off's tooltip says its blocks, bytes, ms and what it went through", () => {
  const d = golden();
  const dec = d.drawn[1];
  const mark = dec.timeline.arrivals.find((a) => a.id === "L1");
  const lines = tooltipLines(dec, { kind: "mark", marks: [mark] }, "slots", CASE.workload);
  assert.equal(lines[0], "P/D 1+1 \u00b7 decode engine 1 \u00b7 KV copied in");
  assert.equal(lines[1], "L1: 30 KV blocks (22.1 MB) from prefill engine 1, copied in 4.50 ms (simulated: the cost model's time, nothing copied)");
  assert.equal(transferLine({ request: "X", blocks: 2, bytes: 1474560, ms: 3.2, prefill: 1, through: "shared_memory" }),
    "X: 2 KV blocks (1.5 MB) from prefill engine 2, copied in 3.20 ms (through shared_memory)");
});

test("the P/D table and the requests table print the lane's own figures", () => {
  const m = golden().metrics[CASE.lane];
  assert.equal(pdCell("p99_itl_ms", m), "66");
  assert.equal(pdCell("pd.copied", m), "69 blk \u00b7 50.9 MB \u00b7 10.3 ms");
  assert.equal(pdCell("pd.mean_transfer_ms", m), "2.1");
  assert.equal(pdCell("pd.copied", { p99_itl_ms: 1 }), "\u2013", "a colocated lane has no copies");
  assert.equal(partsText(m.requests.L1.ttft_parts), "0 + 762 + copy 4.5 + 32 + 66");
  assert.equal(pdValue(m, "pd_blocks"), "69");
  assert.equal(pdValue(m, "pd_ms"), "10");
  assert.equal(pdValue(m, "p99_itl_ms"), undefined, "only the pd_ placeholders are P/D's");
});

test("pd-vs-colocated's claims hold on its run; turned around, each states the run's numbers", () => {
  const d = stored("pd-vs-colocated: no noise");
  assert.deepEqual(checkClaims(DEMO.claims, d).map((c) => c.holds), [true, true]);
  const m = d.metrics;
  const [stall, later] = DEMO.claims.map((c) => ({ ...c, lane: "continuous", others: ["P/D 1+1"] }));
  const [v1, v2] = checkClaims([stall, later], d);
  assert.equal(v1.holds, false);
  assert.ok(v1.text.startsWith(`yet on this run its ITL p99 (${Math.round(m.continuous.p99_itl_ms)} ms) was no lower than`
    + ` P/D 1+1's (${Math.round(m["P/D 1+1"].p99_itl_ms)} ms), not the usual result (`), v1.text);
  assert.equal(v2.holds, false, "a colocated lane copies nothing: its first tokens are not later by a copy");
});

test("each hand-off swept so far is a line from the prefill engine's slots down to the decode engine's marks", () => {
  const drawn = golden().drawn;
  const placed = [{ name: drawn[0].name, grid: { y: 20, h: 100 }, marks: { y: 10 } },
    { name: drawn[1].name, grid: { y: 160, h: 100 }, marks: { y: 150 } }];
  const all = handoffLines(placed, drawn, (ms) => ms / 10, Infinity);
  assert.deepEqual(all.map((l) => l.request).sort(), ["D1", "D2", "D3", "L1", "L2"]);
  const l1 = all.find((l) => l.request === "L1");
  const t = pdTransfers(CASE.records).find((x) => x.request === "L1");
  assert.deepEqual(l1, { request: "L1", x: Math.round(readyMs(t) / 10) + 0.5, y0: 120, y1: 150 });
  assert.deepEqual(handoffLines(placed, drawn, (ms) => ms, readyMs(t) - 1).map((l) => l.request).sort(), ["D1", "D2", "D3"],
    "a copy the playhead has not reached is not drawn");
});

test("on the step clock an engine's steps stand at the lane steps they ran in", () => {
  const [p, dec] = golden().drawn;
  const ran = (i) => CASE.records.flatMap((r, k) => (r.replicas[i] ? [k + 1] : []));
  assert.deepEqual(p.positions, ran(0));
  assert.deepEqual(dec.positions, ran(1));
  const layout = { clock: "steps", axis: { x: 0 }, origin: 0, pxPerUnit: 10 };
  assert.deepEqual(stepSpan(layout, { positions: [2, 5] }, 2), [40, 50]);
  assert.deepEqual(stepSpan(layout, {}, 2), [10, 20], "a lane of one engine: its own steps");
});

// The real vLLM P/D pair (engine/peers/vllm_pd_lane.py) on the page: its records have our P/D lanes' shape, so the
// same code draws it. Records: the golden `pd_vllm` case (one run of the pair on pd-vs-colocated, SmolLM2).
const PAIR = JSON.parse(readFileSync(new URL("../../golden/metrics.json", import.meta.url), "utf8")).pd_vllm;

test("the vLLM P/D pair is drawn as our P/D lanes are: its two engines, its hand-offs at its loads' ends", () => {
  const d = deriveRun({ id: "pair", status: "finished", workload: PAIR.workload, lanes: [PAIR.lane],
    laneConfigs: PAIR.workload.lanes, records: { [PAIR.lane]: PAIR.records }, done: { [PAIR.lane]: true }, t: 0 });
  assert.deepEqual(d.drawn.map((l) => [l.title, l.pd.role]), [
    ["vLLM P/D \u00b7 prefill engine 1 of 1", "prefill"], ["vLLM P/D \u00b7 decode engine 1 of 1", "decode"]]);
  const moved = pdTransfers(PAIR.records);
  assert.equal(moved.length, Object.keys(PAIR.expected.requests).length, "every request handed off");
  const marks = d.drawn[1].timeline.arrivals;
  for (const t of moved) {
    assert.equal(marks.find((a) => a.id === t.request).arrival_ms, readyMs(t));
    assert.equal(t.bytes, t.blocks * 32 * 46080, "the connector's bytes: full 32-token blocks x SmolLM2's bytes a token");
  }
  const mark = marks.find((a) => a.id === moved[0].request);
  const lines = tooltipLines(d.drawn[1], { kind: "mark", marks: [mark] }, "slots", PAIR.workload);
  assert.ok(lines[1].endsWith("(through vllm_example_connector)"), lines[1]);
  assert.equal(d.metrics[PAIR.lane].placement.says, PAIR.records[0].placement.says);
  assert.equal(pdCell("pd.copied", d.metrics[PAIR.lane]).split(" \u00b7 ")[0], `${PAIR.expected.pd.blocks} blk`);
});

test("the compare page lays out a P/D lane's engines, the lanes its scene draws (it laid out the lane and failed)", async () => {
  const { layoutLanes, mergeScenes } = await import("../../../static/js/compare/runs.js");
  const { buildScene } = await import("../../../static/js/canvas/scene.js");
  const derived = golden();
  const side = { label: "A", derived, run: { workload: CASE.workload } };
  const scene = mergeScenes([side], [buildScene(derived, { view: "slots", clock: "ms", t: 1000, focus: null })]);
  const laid = layoutLanes([side], "slots").map((l) => l.name);
  assert.deepEqual(laid, ["A \u00b7 P/D 1+1/prefill0", "A \u00b7 P/D 1+1/decode0"]);
  assert.deepEqual(scene.lanes.map((l) => l.name), laid, "every laid-out lane has its scene lane");
});
