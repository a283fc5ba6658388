// Presenter mode's lanes in turn (static/js/canvas/layout.js), without a browser: under a projector's height budget no row
// shrinks below PRESENT_MIN (a 14 px cell label) — fewer lanes are shown instead, as many as fit — and the turns
// page through every lane, the last one ending at the last lane; two lanes stay together down to PRESENT_PAIR.
// `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { PRESENT_MIN, PRESENT_PAIR, computeLayout, lanesInTurn, nextTurn } from "../../../static/js/canvas/layout.js";

const lane = (name, rows = 4) => ({ name, rows: Array.from({ length: rows }, (_, i) => `slot ${i + 1}`), starts: [0],
  ends: [1], gaps: [], arrivals: [], kvBudget: false, preemptions: null });
const OPTS = { view: "slots", clock: "steps", domain: 15, present: true };

test("four lanes under a 420 px budget: two at a time, rows at least the minimum, and the layout fits", () => {
  const lanes = ["static", "dynamic", "continuous", "chunked"].map((n) => lane(n));
  const squeezed = computeLayout(1250, lanes, { ...OPTS, maxHeight: 420 });
  assert.ok(!squeezed.fits && squeezed.lanes.every((l) => l.rowH >= PRESENT_MIN.row));  // never shrunk below it
  const shown = lanesInTurn(1250, lanes, { ...OPTS, maxHeight: 420 }, 0);
  assert.deepEqual(shown.turn, { from: 0, count: 2, total: 4 });
  assert.ok(shown.fits && shown.height <= 420);
  assert.ok(shown.lanes.every((l) => l.rowH >= PRESENT_MIN.row && l.kv.h >= PRESENT_MIN.kv));
  assert.deepEqual(shown.lanes.map((l) => l.name), ["static", "dynamic"]);
  assert.deepEqual(lanesInTurn(1250, lanes, { ...OPTS, maxHeight: 420 }, 2).lanes.map((l) => l.name), ["continuous", "chunked"]);
});

test("lanes that fit are all shown, as outside presenter mode", () => {
  const shown = lanesInTurn(1250, [lane("static"), lane("continuous")], { ...OPTS, maxHeight: 460 }, 1);
  assert.deepEqual(shown.turn, { from: 0, count: 2, total: 2 });
});

test("two lanes are a comparison: kept together with rows down to the pair's floor, never split into turns", () => {
  const pair = [{ ...lane("recompute"), kvBudget: true, preemptions: [] }, { ...lane("swap"), kvBudget: true, preemptions: [] }];
  const full = computeLayout(1250, pair, { ...OPTS, maxHeight: 470 });
  assert.ok(!full.fits);  // at PRESENT_MIN's rows they would take turns
  const shown = lanesInTurn(1250, pair, { ...OPTS, maxHeight: 470 }, 0);
  assert.deepEqual(shown.turn, { from: 0, count: 2, total: 2 });
  assert.ok(shown.fits && shown.height <= 470);
  assert.ok(shown.lanes.every((l) => l.rowH >= PRESENT_PAIR.row && l.rowH < PRESENT_MIN.row && l.kv.h >= PRESENT_PAIR.kvBudget));
  // paged-vs-reserve's eight slots each (issue 38): both lanes, rows at the readable least of 14 px, in the pair's
  // tighter frame (flags of 14 px), under the budget the page gives at 1280x720 (482 px, measured in Chromium)
  const eight = pair.map((l) => ({ ...l, rows: lane(l.name, 8).rows }));
  const legend = { entries: ["prefill", "decode", "padding", "idle slot", "preempted", "last token", "arrives", "KV memory"]
    .map((label) => ({ label, swatch: 34 })), measure: (text) => text.length * 9 };  // the page's legend, one row
  const both = lanesInTurn(1250, eight, { ...OPTS, legend, maxHeight: 480 }, 0);
  assert.deepEqual(both.turn, { from: 0, count: 2, total: 2 });
  assert.ok(both.fits && both.lanes.every((l) => l.rowH >= PRESENT_PAIR.row && l.kv.h >= 18));  // one 15 px KV line
  assert.ok(both.type.flag >= PRESENT_MIN.cellPx && both.type.label >= PRESENT_MIN.cellPx);
  // a pair that cannot fit even so (twelve slots each) takes turns, never below PRESENT_MIN
  const twelve = pair.map((l) => ({ ...l, rows: lane(l.name, 12).rows }));
  const turns = lanesInTurn(1250, twelve, { ...OPTS, legend, maxHeight: 480 }, 0);
  assert.equal(turns.turn.count, 1);
  assert.ok(turns.lanes.every((l) => l.rowH >= PRESENT_MIN.row));
});

test("turns page by the lanes shown, end at the last lane and wrap round both ways", () => {
  assert.equal(nextTurn({ from: 0, count: 2, total: 3 }, 1), 1);  // lanes 2-3, not lane 3 alone
  assert.equal(nextTurn({ from: 1, count: 2, total: 3 }, 1), 0);
  assert.equal(nextTurn({ from: 0, count: 2, total: 3 }, -1), 1);
  assert.equal(nextTurn({ from: 0, count: 2, total: 4 }, 1), 2);
  assert.equal(nextTurn({ from: 2, count: 2, total: 4 }, -1), 0);
  assert.equal(nextTurn({ from: 0, count: 1, total: 4 }, -1), 3);
  assert.equal(nextTurn({ from: 0, count: 4, total: 4 }, 1), 0);  // every lane shown: nothing to page
});

test("Present's lane turn is not named over the memory map, which draws every lane (issue 38: \"lane 1 of 2\")", async () => {
  const { turnText } = await import("../../../static/js/lanes/present.js");
  const turn = { from: 0, count: 1, total: 2 };
  assert.equal(turnText(turn), "lane 1 of 2");
  assert.equal(turnText(turn, true), "");
});

test("a phone's 308 px canvas gives its cells the width: the label gutter narrows to PHONE.gutter (issue 38: ~45%)", async () => {
  const { PHONE } = await import("../../../static/js/canvas/layout.js");
  const phone = computeLayout(308, [lane("static"), lane("continuous")], { ...OPTS, present: false });
  assert.equal(phone.lanes[0].grid.x, PHONE.gutter);
  assert.ok(phone.lanes[0].grid.w >= 0.7 * 308, `cells ${phone.lanes[0].grid.w} px of 308`);
  assert.equal(computeLayout(1250, [lane("static")], { ...OPTS, present: false }).lanes[0].grid.x, 116);  // a laptop: as before
});
