// static/js/core/metrics.js against the golden fixture (tests/golden/metrics.json, `python -m tests.golden.make`): the
// step records of one lane of each kind go in, the stored metrics of engine/report/metrics.py come out (numbers within
// 1e-9 relative), and the page computes exactly the metric table's keys. `node --test tests/js/`: no browser.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { METRICS, TABLES } from "../../../static/js/core/catalog.js";
import { cellText, columnsOf, formatValue } from "../../../static/js/core/columns.js";
import { METRIC_KEYS, laneMetrics } from "../../../static/js/core/metrics.js";

const CASES = JSON.parse(readFileSync(new URL("../../golden/metrics.json", import.meta.url), "utf8"));
const REQUEST_FIELDS = Object.keys(Object.values(CASES.continuous.expected.requests)[0]);

function close(a, b) {
  if (typeof a !== "number" || typeof b !== "number") return a === b;
  return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
}

function assertSame(mine, want, where) {
  if (Array.isArray(want)) {
    assert.equal(mine.length, want.length, `${where}: length`);
    want.forEach((w, i) => assertSame(mine[i], w, `${where}[${i}]`));
  } else if (want !== null && typeof want === "object") {
    for (const [k, w] of Object.entries(want)) assertSame(mine[k], w, `${where}.${k}`);
  } else {
    assert.ok(close(mine ?? null, want), `${where}: page ${mine}, engine ${want}`);
  }
}

for (const [name, c] of Object.entries(CASES)) {
  test(`laneMetrics of the ${name} records are engine/report/metrics.py's`, () => {
    const m = laneMetrics(c.records, c.workload);
    const { requests, ...numbers } = c.expected;
    assertSame(m, numbers, name);
    assert.deepEqual(Object.keys(m.requests).sort(), Object.keys(requests).sort());
    for (const [id, q] of Object.entries(requests)) {
      // every field the fixture holds: the P/D case's also its hand-off (`transfer`) and its five TTFT parts
      for (const key of new Set([...REQUEST_FIELDS, ...Object.keys(q)])) {
        assertSame(m.requests[id][key], q[key], `${name}.requests.${id}.${key}`);
      }
    }
  });
}

test("the page computes exactly the metric table's keys", () => {
  const m = laneMetrics(CASES.continuous.records, CASES.continuous.workload);
  const computed = Object.keys(m).filter((k) => k !== "requests" && k !== "simulated").sort();
  const table = METRICS.map((x) => x.key).sort();
  assert.deepEqual(computed.filter((k) => !table.includes(k)), [], "computed by metrics.js but not in the table");
  assert.deepEqual(table.filter((k) => !computed.includes(k)), [], "in the table but not computed by metrics.js");
  assert.deepEqual([...METRIC_KEYS], METRICS.map((x) => x.key));
});

test("the page formats a value as Python's format() does for the table's specs", () => {
  assert.equal(formatValue(0.4833, ".0%"), "48%");
  assert.equal(formatValue(2.375, ".3f"), "2.375");
  assert.equal(formatValue(1234.6, ",.0f"), "1,235");
  assert.equal(formatValue(2.375, "mean"), "2.4 (2.375)");
  assert.equal(formatValue(null, ".2f"), "\u2013");
  const spec = columnsOf("page").find((col) => col.key === "speculative");
  assert.equal(cellText(spec, { spec_acceptance_rate: null, tokens_per_decode_cell: 1 }), "\u2013");
  assert.equal(cellText(spec, { spec_acceptance_rate: 0.8, tokens_per_decode_cell: 2.5 }), "80% \u00b7 2.50");
  assert.ok(TABLES.page.some((col) => col.key === "p95_queue_ms"));
});
