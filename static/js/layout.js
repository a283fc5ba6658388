/**
 * Where everything sits on the canvas, in CSS pixels: the time axis, each lane's title, grid and KV
 * bar, the legend row. Plain data (tests read it through window.__lanes) plus a few pure helpers
 * that map a (lane, step, row) to a rectangle and a point back to a cell. Knows nothing of colours.
 */

const GUTTER = 116;  // left margin: slot or request labels, and a KV label like "KV 1687/1844 tok"
const RIGHT = 20;
const AXIS_H = 26;
const TITLE_H = 28;
const KV_GAP = 6;
const KV_H = 14;
const LANE_GAP = 22;
const LEGEND_H = 34;

function rowHeight(view, rows) {
  return view === "requests" ? Math.max(10, Math.min(22, Math.floor(300 / rows)))
    : Math.max(12, Math.min(30, Math.floor(240 / rows)));
}

/**
 * lanes: [{name, rows: [label...], cum: [ms...]}]; clock: "steps" | "ms"; domain: steps or ms the
 * x axis spans. Returns the layout object.
 */
export function computeLayout(width, lanes, { view, clock, domain }) {
  const gridX = GUTTER;
  const gridW = Math.max(60, width - GUTTER - RIGHT);
  const pxPerUnit = gridW / Math.max(domain, 1e-9);
  let y = AXIS_H;
  const placed = lanes.map((lane) => {
    const rowH = rowHeight(view, Math.max(1, lane.rows.length));
    const title = { x: 0, y, h: TITLE_H };
    const grid = { x: gridX, y: y + TITLE_H, w: gridW, h: rowH * lane.rows.length };
    const kv = { x: gridX, y: grid.y + grid.h + KV_GAP, w: gridW, h: KV_H };
    y = kv.y + kv.h + LANE_GAP;
    return { name: lane.name, rows: lane.rows, rowH, title, grid, kv, cum: lane.cum };
  });
  const legend = { x: 0, y, w: width, h: LEGEND_H };
  return {
    width, height: Math.ceil(y + LEGEND_H), view, clock, domain, pxPerUnit,
    axis: { x: gridX, y: 0, w: gridW, h: AXIS_H },
    lanes: placed, legend,
  };
}

/** x of the boundary after `step` steps of a lane (step 0: the grid's left edge). */
export function stepX(layout, lane, step) {
  const units = layout.clock === "steps" ? step : lane.cum[Math.min(step, lane.cum.length - 1)];
  return lane.grid.x + units * layout.pxPerUnit;
}

/** x of a playhead at `t` (steps or ms). */
export function timeX(layout, t) {
  return layout.axis.x + t * layout.pxPerUnit;
}

/** The rectangle of a lane's cell for `step` (1-based) and `row` (0-based). */
export function cellRect(layout, lane, step, row) {
  const x0 = stepX(layout, lane, step - 1);
  const x1 = stepX(layout, lane, step);
  return { x: x0, y: lane.grid.y + row * lane.rowH, w: x1 - x0, h: lane.rowH };
}

/** The cell under a canvas point: {lane, step, row} or null. */
export function hitTest(layout, x, y) {
  for (const lane of layout.lanes) {
    const g = lane.grid;
    if (y < g.y || y >= g.y + g.h || x < g.x) continue;
    const row = Math.floor((y - g.y) / lane.rowH);
    const steps = lane.cum.length - 1;
    for (let s = 1; s <= steps; s += 1) {
      if (x < stepX(layout, lane, s)) return { lane: lane.name, step: s, row };
    }
    return null;
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
