/**
 * Where everything sits on the canvas, in CSS pixels: the time axis, each lane's title, arrival
 * marks, preemption flags, grid, a fleet replica's load band and KV bar, the legend row. Plain data (tests read it through
 * window.__lanes) plus a few pure helpers that map a (lane, step, row) to a rectangle and a point back
 * to what is there. On the milliseconds clock a step spans its lane-clock start to its end, so a lane
 * that waited for arrivals shows a gap. The x-axis shows `domain` units from `from` (a zoom shows a
 * part of the run); `maxHeight` shrinks rows (then KV bars) until the whole canvas fits a height
 * budget; `present` picks the larger type scale, under which rows and KV bars never shrink below what
 * the back of a room reads (PRESENT_MIN): `lanesInTurn` then shows as many lanes as fit, in turn
 * (presenter mode on a projector), except that two lanes, a comparison, stay together with rows down to PRESENT_PAIR
 * (and, where even that is too tall, in the tighter frame of SIZE.pair). The legend's items
 * are placed here too, wrapped onto as many rows as the width needs (given a function that measures a
 * label). Knows nothing of colours.
 */

const RIGHT = 20;
const MARK_H = 11;   // the band of arrival marks above a lane's grid
const KV_GAP = 6;
const SPLIT_H = 12;  // a tensor-parallel lane's band under its grid: each step's compute and all-reduce
const NOTE_H = 16;   // the placement line under a split lane's title: where its processes ran
const LOAD_H = 18;   // a fleet replica's load band, under its grid: its requests running or waiting over time
const LEGEND_H = 58;  // room for the legend to wrap onto a second row (when its items are not placed here)
const NARROW = 560;  // below this canvas width the legend starts at the left edge, not under the grid
const MIN_ROW = 6;    // the least a row shrinks to under a height budget
const MIN_KV = 8;
/** Presenter mode's floor: a row whose cell label is at least 14 px (drawCell: row - 10) and a KV bar whose label is
 * at least 12 px; below it the page shows fewer lanes at a time rather than smaller ones. */
export const PRESENT_MIN = Object.freeze({ row: 24, kv: 14, kvBudget: 24, cellPx: 14, kvPx: 12 });  // kvBudget: two lines
/** Presenter mode's floor for a two-lane comparison, which is never split into turns (issue 38: paged-vs-reserve's two
 * lanes of eight slots at 1280x720): rows down to 14 px, the readable least (a row's label at 14 px; a cell keeps its
 * 14 px label or none), and KV bars whose two labels stay at 14 px. */
export const PRESENT_PAIR = Object.freeze({ row: 14, kv: 14, kvBudget: 28 });

/** Font sizes (px) the renderer draws with: the page's, and presenter mode's for the back of the room. */
export const TYPE = Object.freeze({
  normal: Object.freeze({ axis: 11, label: 11, title: 14, caption: 12, legend: 12, cell: 12, flag: 12 }),
  present: Object.freeze({ axis: 15, label: 15, title: 21, caption: 16, legend: 16, cell: 16, flag: 16 }),
  pair: Object.freeze({ axis: 15, label: 15, title: 21, caption: 16, legend: 16, cell: 16, flag: 14 }),
});

/** Sizes (px) that follow the type: the label gutter, the axis, titles, KV bars (taller where a budget binds), flags;
 * `endGap` (optional): the gap below the last lane, else a lane gap. */
const SIZE = {
  normal: { gutter: 116, axisH: 26, titleH: 28, compactTitleH: 24, laneGap: 22, compactGap: 14, kvBudget: 22,
    kvPlain: 16, flagH: 20, legendRow: 24, legendItem: 18, legendPad: 12, rows: [360, 240, 30, 12], reqRows: [480, 300, 22, 10] },
  present: { gutter: 158, axisH: 30, titleH: 34, compactTitleH: 29, laneGap: 16, compactGap: 10, kvBudget: 28,
    kvPlain: 18, flagH: 24, legendRow: 30, legendItem: 22, legendPad: 6, rows: [560, 400, 48, 12], reqRows: [620, 420, 34, 10] },
};
/** A two-lane comparison in Present that fits no other way: the same type in a tighter frame (a shorter axis band and
 * titles, flags of 14 px, KV bars of one 15 px line, "KV 6/28 blk", the legend right under the last KV bar and from
 * the canvas's left edge, so that it keeps to one row). */
SIZE.pair = { ...SIZE.present, axisH: 26, compactTitleH: 26, compactGap: 8, endGap: 2, flagH: 22, legendPad: 2,
  kvBudget: 18, legendAtEdge: true };
Object.freeze(SIZE);

/** A phone's canvas (narrower than PHONE.width): a narrow label gutter, so the cells get the width (issue 38: row
 * labels took ~45% of a 308 px canvas); the renderer fits the row and KV labels into it. */
export const PHONE = Object.freeze({ width: 480, gutter: 64 });

/** The label gutter's width at a canvas `width`. */
export function gutterFor(width, present = false) {
  return !present && width < PHONE.width ? PHONE.gutter : (present ? SIZE.present : SIZE.normal).gutter;
}

/**
 * The legend's items in rows that fit `width`: entries [{label, swatch}] (swatch: its width in px), `measure(label)`
 * the label's width. Returns {items: [{...entry, x, y, w, h}] (y from the legend's top), h}.
 */
export function placeLegend(entries, measure, width, gridX = SIZE.normal.gutter, size = SIZE.normal) {
  const x0 = width < NARROW || size.legendAtEdge ? 4 : gridX;
  const items = [];
  let x = x0;
  let y = 8;
  for (const entry of entries) {
    const w = entry.swatch + 5 + measure(entry.label);
    if (x > x0 && x + w > width - 4) {
      x = x0;
      y += size.legendRow;
    }
    items.push({ ...entry, x, y, w, h: size.legendItem });
    x += w + 18;
  }
  return { items, h: items.length ? y + size.legendItem + size.legendPad : 8 };
}

/** Row height: lanes share a height budget, so four lanes still fit one screen. */
function rowHeight(size, view, rows, laneCount) {
  const [total, cap, most, least] = view === "requests" ? size.reqRows : size.rows;
  const share = Math.min(cap, total / Math.max(1, laneCount));
  return Math.max(least, Math.min(most, Math.floor(share / rows)));
}

/** Lanes stacked top to bottom with the given row and KV heights; `y` ends below the last lane. */
function stack(lanes, rowHs, kvHs, { size, gridX, gridW, compact }) {
  const titleH = compact ? size.compactTitleH : size.titleH;
  const laneGap = compact ? size.compactGap : size.laneGap;
  let y = size.axisH;
  const placed = lanes.map((lane, i) => {
    const rowH = rowHs[i];
    const title = { x: 0, y, h: titleH };
    const markH = lane.arrivals ? MARK_H : 0;
    const note = { x: gridX, y: y + titleH, w: gridW, h: lane.note ? NOTE_H : 0 };
    const marks = { x: gridX, y: note.y + note.h, w: gridW, h: markH };
    const flags = { x: gridX, y: marks.y + markH, w: gridW, h: lane.preemptions ? size.flagH : 0 };
    const grid = { x: gridX, y: flags.y + flags.h, w: gridW, h: rowH * lane.rows.length };
    const split = { x: gridX, y: grid.y + grid.h + (lane.split ? 3 : 0), w: gridW, h: lane.split ? SPLIT_H : 0 };
    const load = { x: gridX, y: split.y + split.h + (lane.load ? KV_GAP : 0), w: gridW, h: lane.load ? LOAD_H : 0 };
    const kv = { x: gridX, y: load.y + load.h + KV_GAP, w: gridW, h: kvHs[i] };
    y = kv.y + kv.h + (i === lanes.length - 1 && size.endGap !== undefined ? size.endGap : laneGap);
    return { ...lane, rowH, title, note, marks, flags, grid, split, load, kv };
  });
  return { placed, y };
}

/**
 * lanes: [{name, rows: [label...], starts: [ms], ends: [ms], gaps: [{step, from, to}], arrivals:
 * [{id, arrival, arrival_ms}] | null (no arrival marks), kvBudget (optional: a KV budget binds, its bar is taller),
 * preemptions (optional: [{step, id, slot}] for a lane that may preempt: a band of flags above its grid), load
 * (optional: a fleet's replica: a band under its grid for its load over time), split (optional: a tensor-parallel lane:
 * a band under its grid, each step's compute and all-reduce), note (optional: a line under its title, its placement)}];
 * clock: "steps" | "ms"; domain: steps or ms the x axis spans, from `from` (default 0); legend (optional):
 * {entries, measure} to place the legend's items (see placeLegend), else a fixed band; maxHeight (optional): the
 * canvas height to fit; present: presenter mode's larger type; compact: the tighter titles and gaps of three or
 * more lanes (default: when there are); least: the floor rows and KV bars shrink to (default: PRESENT_MIN in
 * presenter mode); pair: presenter mode's tighter frame for two lanes (SIZE.pair).
 */
export function computeLayout(width, lanes, { view, clock, domain, from = 0, legend: legendSpec = null,
  maxHeight = null, present = false, compact = lanes.length > 2, least: floor = null, pair = false }) {
  const size = pair ? SIZE.pair : present ? SIZE.present : SIZE.normal;
  const gridX = gutterFor(width, present);
  const gridW = Math.max(60, width - gridX - RIGHT);
  const pxPerUnit = gridW / Math.max(domain, 1e-9);
  const geometry = { size, gridX, gridW, compact };
  const key = legendSpec ? placeLegend(legendSpec.entries, legendSpec.measure, width, gridX, size)
    : { items: null, h: LEGEND_H };
  const least = floor || (present ? { row: PRESENT_MIN.row, kv: PRESENT_MIN.kv, kvBudget: PRESENT_MIN.kvBudget }
    : { row: MIN_ROW, kv: MIN_KV, kvBudget: MIN_KV });
  let rowHs = lanes.map((lane) => Math.max(least.row,
    rowHeight(size, view, Math.max(1, lane.rows.length), lanes.length)));
  let kvHs = lanes.map((lane) => (lane.kvBudget ? size.kvBudget : size.kvPlain));
  let { placed, y } = stack(lanes, rowHs, kvHs, geometry);
  if (maxHeight && y + key.h > maxHeight) {
    // 1) KV bars without a budget (a lane's whole capacity: the least telling) go thin; 2) rows shrink in proportion,
    // down to the least row; 3) then every KV bar, down to the least KV bar
    kvHs = lanes.map((lane, i) => (lane.kvBudget ? kvHs[i] : Math.max(least.kv, MIN_KV + 2)));
    ({ placed, y } = stack(lanes, rowHs, kvHs, geometry));
    const rowsH = placed.reduce((n, l) => n + l.grid.h, 0);
    const room = Math.max(0, maxHeight - key.h - (y - rowsH));
    rowHs = rowHs.map((h) => Math.max(least.row, Math.min(h, Math.floor(h * (room / rowsH)))));
    ({ placed, y } = stack(lanes, rowHs, kvHs, geometry));
    const over = y + key.h - maxHeight;
    if (over > 0) {
      const kvTotal = kvHs.reduce((a, b) => a + b, 0);
      kvHs = kvHs.map((h, i) => Math.max(lanes[i].kvBudget ? least.kvBudget : least.kv,
        Math.floor(h - (over * h) / kvTotal) - 1));
      ({ placed, y } = stack(lanes, rowHs, kvHs, geometry));
    }
  }
  const legend = { x: 0, y, w: width, h: key.h, items: key.items };
  return {
    width, height: Math.ceil(y + legend.h), view, clock, domain, origin: from, pxPerUnit,
    type: pair ? TYPE.pair : present ? TYPE.present : TYPE.normal, present: present || pair, fits: !maxHeight || Math.ceil(y + legend.h) <= maxHeight,
    axis: { x: gridX, y: 0, w: gridW, h: size.axisH },
    lanes: placed, legend,
  };
}

/**
 * Presenter mode's lanes in turn: the layout of as many lanes as fit `opts.maxHeight` at PRESENT_MIN or larger,
 * starting near `from` (a lane index), with `turn` = {from, count, total} (count < total: some lanes wait their turn).
 * Every lane that fits is shown: a window is never short of the last lane (lanes 3-4 of 4, not 4 alone).
 */
export function lanesInTurn(width, lanes, opts, from = 0) {
  let count = lanes.length;
  const turnOpts = { ...opts, compact: lanes.length > 2 };  // lanes in turn keep the compact titles of the many
  let layout = computeLayout(width, lanes, turnOpts);
  if (!layout.fits && lanes.length === 2) {  // two lanes are a comparison: both on the screen, rows down to the pair's
    for (const pair of [false, true]) {       // floor, in the tighter frame if need be
      const least = pair ? { ...PRESENT_PAIR, kvBudget: SIZE.pair.kvBudget } : PRESENT_PAIR;
      const both = computeLayout(width, lanes, { ...turnOpts, compact: true, least, pair });
      if (both.fits) return { ...both, turn: { from: 0, count: 2, total: 2 } };
    }
  }
  while (!layout.fits && count > 1) {
    count -= 1;
    const start = Math.max(0, Math.min(from, lanes.length - count));
    layout = computeLayout(width, lanes.slice(start, start + count), turnOpts);
  }
  const start = count === lanes.length ? 0 : Math.max(0, Math.min(from, lanes.length - count));
  return { ...layout, turn: { from: start, count, total: lanes.length } };
}

/** The first lane of the next (`delta` 1) or previous (-1) turn: pages of `count` lanes, wrapping round; the last page
 * ends at the last lane. */
export function nextTurn(turn, delta) {
  if (!turn || turn.count >= turn.total) return 0;
  const last = turn.total - turn.count;
  if (delta > 0) return turn.from >= last ? 0 : Math.min(last, turn.from + turn.count);
  return turn.from <= 0 ? last : Math.max(0, turn.from - turn.count);
}

/** x of a playhead at `t` (steps or ms). */
export function timeX(layout, t) {
  return layout.axis.x + (t - (layout.origin || 0)) * layout.pxPerUnit;
}

/** The time (steps or ms) at canvas x: the inverse of timeX. */
export function timeAt(layout, x) {
  return (layout.origin || 0) + (x - layout.axis.x) / layout.pxPerUnit;
}

/** [x0, x1] of a lane's step (1-based): one unit on the step clock (a P/D engine's: at the lane step it ran in,
 * `lane.positions`), its start to its end on the ms clock. */
export function stepSpan(layout, lane, step) {
  if (layout.clock === "steps") {
    const k = lane.positions ? lane.positions[step - 1] : step;
    return [timeX(layout, k - 1), timeX(layout, k)];
  }
  return [timeX(layout, lane.starts[step - 1]), timeX(layout, lane.ends[step - 1])];
}

/** The rectangle of a lane's cell for `step` (1-based) and `row` (0-based). */
export function cellRect(layout, lane, step, row) {
  const [x0, x1] = stepSpan(layout, lane, step);
  return { x: x0, y: lane.grid.y + row * lane.rowH, w: x1 - x0, h: lane.rowH };
}

/** The whole column of a step (every row), e.g. a step that computed nothing. */
export function columnRect(layout, lane, step) {
  const [x0, x1] = stepSpan(layout, lane, step);
  return { x: x0, y: lane.grid.y, w: x1 - x0, h: lane.grid.h };
}

/** The rectangle of a gap (the lane waiting for arrivals) on the ms clock; null on the step clock, where it has no width. */
export function gapRect(layout, lane, gap) {
  if (layout.clock === "steps") return null;
  const x0 = timeX(layout, gap.from);
  return { x: x0, y: lane.grid.y, w: timeX(layout, gap.to) - x0, h: lane.grid.h };
}

/** x of a request's arrival mark: its ms on the ms clock, the start of the first step it could join on the step clock. */
export function markX(layout, mark) {
  return timeX(layout, layout.clock === "steps" ? mark.arrival : mark.arrival_ms);
}

/** A preemption flag's text. */
export function flagText(p) {
  return p.swapped ? `\u21c4 ${p.id} swapped out` : `\u00d7 ${p.id} preempted`;
}

/**
 * A preemption's flag: `pill` (its label, in the lane's flag band, ending at the step's right edge, or starting at
 * its left edge when there is no room before it) and `pole` (a line from the pill down to the preempted row).
 */
export function flagRects(layout, lane, p) {
  const [x0, x1] = stepSpan(layout, lane, p.step);
  const px = layout.type ? layout.type.flag : 12;
  const w = Math.ceil(flagText(p).length * px * 0.66) + 14;  // bold text, estimated (layout measures no fonts)
  const left = x1 - w >= lane.grid.x ? x1 - w : x0;
  const pill = { x: left, y: lane.flags.y + 2, w, h: lane.flags.h - 4 };
  const row = layout.view === "requests" ? Math.max(0, lane.rows.indexOf(p.id)) : p.slot;
  const poleX = Math.max(x0, Math.min(x1, left === x0 ? x0 + 1 : x1 - 1)) - 1.5;
  return { pill, pole: { x: poleX, y: pill.y + pill.h, w: 3, h: lane.grid.y + row * lane.rowH - (pill.y + pill.h) } };
}

/**
 * What is under a canvas point: {lane, kind: "cell", step, row}, {lane, kind: "gap", gap}, {lane, kind: "split", step}
 * (a tensor-parallel lane's band of forward splits),
 * {lane, kind: "mark", marks: [...]} (arrival marks within 6 px), or null.
 */
export function hitTest(layout, x, y) {
  if (x < layout.axis.x || x > layout.axis.x + layout.axis.w) return null;
  for (const lane of layout.lanes) {
    const m = lane.marks;
    if (m.h && y >= m.y && y < m.y + m.h) {
      const near = (lane.arrivals || []).filter((k) => Math.abs(markX(layout, k) - x) <= 6);
      return near.length ? { lane: lane.name, kind: "mark", marks: near } : null;
    }
    const sp = lane.split;
    if (sp && sp.h && y >= sp.y && y < sp.y + sp.h) {
      for (let s = 1; s <= lane.ends.length; s += 1) {
        const [x0, x1] = stepSpan(layout, lane, s);
        if (x >= x0 && x < x1) return { lane: lane.name, kind: "split", step: s };
      }
      return null;
    }
    const g = lane.grid;
    if (y < g.y || y >= g.y + g.h || x < g.x) continue;
    const row = Math.floor((y - g.y) / lane.rowH);
    for (let s = 1; s <= lane.ends.length; s += 1) {
      const [x0, x1] = stepSpan(layout, lane, s);
      if (x >= x0 && x < x1) return { lane: lane.name, kind: "cell", step: s, row };
    }
    const gap = layout.clock === "ms" && lane.gaps.find((k) => x >= timeX(layout, k.from) && x < timeX(layout, k.to));
    return gap ? { lane: lane.name, kind: "gap", gap } : null;
  }
  return null;
}

/** Axis ticks: [{x, label}] spaced at least `minGap` px apart, over the part of the run the axis shows. */
export function axisTicks(layout, minGap = 44) {
  const nice = layout.clock === "steps" ? [1, 2, 5, 10, 20, 50, 100, 200, 500]
    : [50, 100, 200, 250, 500, 1000, 2000, 5000, 10000, 20000, 60000];
  const gap = Math.max(minGap, layout.type ? layout.type.axis * 4 : minGap);
  const every = nice.find((n) => n * layout.pxPerUnit >= gap) || nice[nice.length - 1];
  const origin = layout.origin || 0;
  const ticks = [];
  for (let v = Math.ceil(origin / every - 1e-9) * every; v <= origin + layout.domain + 1e-9; v += every) {
    const label = layout.clock === "steps" ? String(v) : `${(v / 1000).toFixed(every < 1000 ? 2 : 0)} s`;
    ticks.push({ x: timeX(layout, v), label, value: v });
  }
  return ticks;
}
