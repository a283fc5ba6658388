/**
 * Where everything sits on the canvas, in CSS pixels: the time axis, each lane's title, arrival
 * marks, grid and KV bar, the legend row. Plain data (tests read it through window.__lanes) plus a
 * few pure helpers that map a (lane, step, row) to a rectangle and a point back to what is there.
 * On the milliseconds clock a step spans its lane-clock start to its end, so a lane that waited for
 * arrivals shows a gap. The legend's items are placed here too, wrapped onto as many rows as the width
 * needs (given a function that measures a label). Knows nothing of colours.
 */

const GUTTER = 116;  // left margin: slot or request labels, and a KV label like "KV 1687/1844 tok"
const RIGHT = 20;
const AXIS_H = 26;
const MARK_H = 11;   // the band of arrival marks above a lane's grid
const KV_GAP = 6;
const KV_H = 14;
const LEGEND_H = 58;  // room for the legend to wrap onto a second row (when its items are not placed here)
const LEGEND_ROW = 24;
const LEGEND_ITEM_H = 18;
const NARROW = 560;  // below this canvas width the legend starts at the left edge, not under the grid

/**
 * The legend's items in rows that fit `width`: entries [{label, swatch}] (swatch: its width in px), `measure(label)`
 * the label's width. Returns {items: [{...entry, x, y, w, h}] (y from the legend's top), h}.
 */
export function placeLegend(entries, measure, width, gridX = GUTTER) {
  const x0 = width < NARROW ? 4 : gridX;
  const items = [];
  let x = x0;
  let y = 8;
  for (const entry of entries) {
    const w = entry.swatch + 5 + measure(entry.label);
    if (x > x0 && x + w > width - 4) {
      x = x0;
      y += LEGEND_ROW;
    }
    items.push({ ...entry, x, y, w, h: LEGEND_ITEM_H });
    x += w + 18;
  }
  return { items, h: items.length ? y + LEGEND_ITEM_H + 12 : 8 };
}

/** Row height: lanes share a height budget, so four lanes still fit one screen. */
function rowHeight(view, rows, laneCount) {
  const share = (total, cap) => Math.min(cap, total / Math.max(1, laneCount));
  return view === "requests" ? Math.max(10, Math.min(22, Math.floor(share(480, 300) / rows)))
    : Math.max(12, Math.min(30, Math.floor(share(360, 240) / rows)));
}

/**
 * lanes: [{name, rows: [label...], starts: [ms], ends: [ms], gaps: [{step, from, to}], arrivals:
 * [{id, arrival, arrival_ms}] | null (no arrival marks)}]; clock: "steps" | "ms"; domain: steps or ms the x axis spans;
 * legend (optional): {entries, measure} to place the legend's items (see placeLegend), else a fixed band.
 */
export function computeLayout(width, lanes, { view, clock, domain, legend: legendSpec = null }) {
  const gridX = GUTTER;
  const gridW = Math.max(60, width - GUTTER - RIGHT);
  const pxPerUnit = gridW / Math.max(domain, 1e-9);
  const compact = lanes.length > 2;
  const titleH = compact ? 24 : 28;
  const laneGap = compact ? 14 : 22;
  let y = AXIS_H;
  const placed = lanes.map((lane) => {
    const rowH = rowHeight(view, Math.max(1, lane.rows.length), lanes.length);
    const title = { x: 0, y, h: titleH };
    const markH = lane.arrivals ? MARK_H : 0;
    const marks = { x: gridX, y: y + titleH, w: gridW, h: markH };
    const grid = { x: gridX, y: marks.y + markH, w: gridW, h: rowH * lane.rows.length };
    const kv = { x: gridX, y: grid.y + grid.h + KV_GAP, w: gridW, h: KV_H };
    y = kv.y + kv.h + laneGap;
    return { ...lane, rowH, title, marks, grid, kv };
  });
  const key = legendSpec ? placeLegend(legendSpec.entries, legendSpec.measure, width, gridX) : { items: null, h: LEGEND_H };
  const legend = { x: 0, y, w: width, h: key.h, items: key.items };
  return {
    width, height: Math.ceil(y + legend.h), view, clock, domain, pxPerUnit,
    axis: { x: gridX, y: 0, w: gridW, h: AXIS_H },
    lanes: placed, legend,
  };
}

/** x of a playhead at `t` (steps or ms). */
export function timeX(layout, t) {
  return layout.axis.x + t * layout.pxPerUnit;
}

/** [x0, x1] of a lane's step (1-based): one unit on the step clock, its start to its end on the ms clock. */
export function stepSpan(layout, lane, step) {
  if (layout.clock === "steps") return [timeX(layout, step - 1), timeX(layout, step)];
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

/**
 * What is under a canvas point: {lane, kind: "cell", step, row}, {lane, kind: "gap", gap},
 * {lane, kind: "mark", marks: [...]} (arrival marks within 6 px), or null.
 */
export function hitTest(layout, x, y) {
  for (const lane of layout.lanes) {
    const m = lane.marks;
    if (m.h && y >= m.y && y < m.y + m.h) {
      const near = (lane.arrivals || []).filter((k) => Math.abs(markX(layout, k) - x) <= 6);
      return near.length ? { lane: lane.name, kind: "mark", marks: near } : null;
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

/** Axis ticks: [{x, label}] spaced at least `minGap` px apart. */
export function axisTicks(layout, minGap = 44) {
  const nice = layout.clock === "steps" ? [1, 2, 5, 10, 20, 50, 100, 200, 500]
    : [50, 100, 200, 250, 500, 1000, 2000, 5000, 10000, 20000, 60000];
  const every = nice.find((n) => n * layout.pxPerUnit >= minGap) || nice[nice.length - 1];
  const ticks = [];
  for (let v = 0; v <= layout.domain + 1e-9; v += every) {
    const label = layout.clock === "steps" ? String(v) : `${(v / 1000).toFixed(every < 1000 ? 2 : 0)} s`;
    ticks.push({ x: timeX(layout, v), label, value: v });
  }
  return ticks;
}
