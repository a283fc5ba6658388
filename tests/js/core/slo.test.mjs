// static/js/core/slo.js, the twin of engine/workload/slo.py: the same checks refuse the same targets naming the same
// field, the same verdict on a request, and the same lane figures as the golden fixture (tests/golden/metrics.json,
// written by the engine) — including a fleet's, pooled over its replicas; the tooltip's verdict and the legend's entries.
// `node --test tests/js/`: no browser.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { laneMetrics } from "../../../static/js/core/metrics.js";
import { checkSlo, meetsSlo, sloFigures, sloMisses, sloVerdicts, sloWords, stepPosition, withSlo } from "../../../static/js/core/slo.js";

const CASES = JSON.parse(readFileSync(new URL("../../golden/metrics.json", import.meta.url), "utf8"));
const request = (ttft_ms, tpot_ms, returned = true) => ({ ttft_ms, tpot_ms, return_step: returned ? 5 : null });

test("a bad SLO is refused naming the field, as the engine refuses it", () => {
  for (const [raw, field, words] of [
    [{}, "slo", "give ttft_ms, tpot_ms or both"], [{ ttft_ms: 0 }, "slo.ttft_ms", "more than 0"],
    [{ tpot_ms: -5 }, "slo.tpot_ms", "more than 0"], [{ ttft_ms: 4_000_000 }, "slo.ttft_ms", "at most 3600000"],
    [{ ttft_ms: "fast" }, "slo.ttft_ms", "a number of milliseconds"], [{ ttft_ms: true }, "slo.ttft_ms", "a number"],
    [{ ttft_ms: NaN }, "slo.ttft_ms", "a number of milliseconds"], [{ ttft_s: 1 }, "slo.ttft_s", "use ttft_ms and tpot_ms"],
    [[500], "slo", "must be an object"]]) {
    const { error } = checkSlo(raw);
    assert.equal(error.field, field, JSON.stringify(raw));
    assert.ok(error.message.includes(words), `${JSON.stringify(raw)}: ${error.message}`);
  }
  assert.deepEqual(checkSlo({ ttft_ms: 700, tpot_ms: null }), { slo: { ttft_ms: 700 } });
  assert.deepEqual(checkSlo(null), { slo: null });
  assert.equal(sloWords({ ttft_ms: 700, tpot_ms: 150 }), "TTFT \u2264 700 ms \u00b7 TPOT \u2264 150 ms");
});

test("a request meets the SLO at its targets and misses just past them", () => {
  const slo = { ttft_ms: 500, tpot_ms: 100 };
  assert.equal(meetsSlo(request(500, 100), slo), true);
  assert.deepEqual(sloMisses(request(500.01, 100.01), slo), ["ttft", "tpot"]);
  assert.equal(meetsSlo(request(200, null), slo), true);  // a one-token answer has no TPOT
  assert.equal(meetsSlo(request(null, null, false), slo), null);  // not returned: no verdict yet
  assert.equal(meetsSlo(request(900, 10), { tpot_ms: 50 }), true);
  const figures = sloFigures([request(100, 50), request(600, 50), request(100, 150), request(null, null, false)], 2, slo);
  assert.deepEqual(figures, { slo_met: 1, request_goodput: 0.5, slo_attainment: 1 / 3 });
  assert.deepEqual(sloFigures([], 0, null), { slo_met: null, request_goodput: null, slo_attainment: null });
});

test("the golden cases with an SLO give the engine's figures, a fleet's pooled over its replicas", () => {
  const withOne = Object.entries(CASES).filter(([, c]) => c.workload.slo);
  assert.deepEqual(withOne.map(([name]) => name).sort(),
    ["chunked_prefill", "fleet", "ms_arrivals_continuous", "ms_arrivals_dynamic", "sjf"]);
  for (const [name, c] of withOne) {
    const m = laneMetrics(c.records, c.workload);
    for (const key of ["slo_met", "request_goodput", "slo_attainment"]) {
      assert.ok(Math.abs(m[key] - c.expected[key]) <= 1e-9 * Math.max(1, Math.abs(m[key])), `${name}.${key}: ${m[key]} vs ${c.expected[key]}`);
    }
  }
  assert.equal(CASES.static.expected.slo_met, null);
});

test("the teacher's targets replace the workload's in every figure", () => {
  const c = CASES.sjf;
  const m = laneMetrics(c.records, c.workload);
  const loose = withSlo(m, { ttft_ms: 5000 });
  assert.equal(m.slo_met, 6);
  assert.equal(loose.slo_met, 8);
  assert.equal(loose.request_goodput, 8 / m.wall_s);
  assert.equal(withSlo(m, null).slo_met, null);
  assert.equal(loose.requests_per_s, m.requests_per_s);  // nothing else changes
});

test("a TTFT deadline on the step clock falls inside the step whose span holds it", () => {
  const starts = [0, 100, 300];
  const ends = [100, 200, 400];
  assert.equal(stepPosition(50, starts, ends), 0.5);
  assert.equal(stepPosition(150, starts, ends), 1.5);
  assert.equal(stepPosition(250, starts, ends), 2);  // in the gap before step 3: at its start
  assert.equal(stepPosition(450, starts, ends), 3.5);  // past the end: at the last step's pace
  assert.equal(stepPosition(10, [], []), 0);
});

test("the tooltip says a request's verdict once the playhead passed its answer, its targets before", async () => {
  const { tooltipLines } = await import("../../../static/js/ui/panels.js");
  const { legendEntries } = await import("../../../static/js/canvas/legend.js");
  const cell = { state: "decode", request: "R4", token_id: 5, token: "Hi" };
  const record = { step: 3, slots: [cell], ms: 40, forward_ms: 38, forward: "decode" };
  const slo = { ttft_ms: 500, tpot_ms: 150 };
  const verdicts = sloVerdicts({ R4: { ttft_ms: 782, tpot_ms: 63, return_step: 8, first_token_step: 3, finish_step: 8 } }, slo);
  const lane = (revealed) => ({ name: "fcfs", policy: "continuous", config: { options: {} }, slo, verdicts, revealed,
    timeline: { arrivals: [{ id: "R4", arrival: 0, arrival_ms: 100 }], starts: [0, 40, 80], ends: [40, 80, 120] } });
  const at = (revealed) => tooltipLines(lane(revealed), { kind: "cell", step: 3, what: { kind: "decode", request: "R4", cell, record } },
    "slots", { requests: [{ id: "R4", prompt: "p", max_new_tokens: 4 }] });
  assert.ok(at(8).includes("SLO missed: TTFT 782 ms > 500 \u00b7 TPOT 63 ms \u2264 150"), at(8).join("\n"));
  assert.ok(at(3).includes("SLO: TTFT \u2264 500 ms \u00b7 TPOT \u2264 150 ms (first token due by 0.60 s)"), at(3).join("\n"));
  const labels = (flags) => legendEntries(flags).map((e) => e.label);
  assert.ok(labels({ view: "requests", slo: true }).includes("TTFT deadline (SLO)"));
  assert.ok(!labels({ view: "slots", slo: true }).includes("TTFT deadline (SLO)"));  // deadlines sit on request rows
  assert.ok(labels({ view: "slots", slo: true }).includes("missed the SLO"));
  assert.ok(!labels({ view: "slots", slo: false }).includes("missed the SLO"));
});
