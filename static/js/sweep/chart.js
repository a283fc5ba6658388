/**
 * The two sweep charts, drawn by uPlot (window.uPlot, from /static/vendor/uPlot.iife.min.js): a metric
 * against request rate (a log-2 axis when the rates span 4x or more), one line per lane with its points
 * marked, a legend naming the lanes, and an optional dashed horizontal line (the TTFT SLO). `syncChart`
 * builds a chart when its shape (lanes, rates, SLO) changes and otherwise only hands uPlot new data; a click near a point only reports the
 * rate through `onPick`. The numbers come from sweep/state.js's `seriesOf`, as the table's do.
 */

/** Lane colours and dashes (Okabe-Ito: told apart without colour vision too, by the dash). */
export const LANE_STYLE = Object.freeze([
  { stroke: "#0072b2", dash: [] },
  { stroke: "#d55e00", dash: [8, 4] },
  { stroke: "#009e73", dash: [2, 3] },
  { stroke: "#cc79a7", dash: [10, 3, 2, 3] },
]);
const INK = "#1d2330";
const RULE = "#e3e6ea";
const SLO_STROKE = "#b3261e";
const FONT = "12px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
const HEIGHT = 250;
const PICK_PX = 14;  // how near a point a click must land to open it

/** An empty chart holder; `syncChart` fills it. */
export function createChart(container, { yLabel, format, onPick }) {
  return { container, yLabel, format, onPick, plot: null, shape: "", data: null, lanes: [], slo: null };
}

function padded(min, max) {
  if (min === null || max === null) return [0, 1];
  if (min === max) return [Math.max(0, min - 1), max + 1];
  const pad = (max - min) * 0.06;
  return [Math.max(0, min - pad), max + pad];
}

/** The lane series index (1-based, as uPlot counts) whose point at the cursor is within PICK_PX, or -1. */
function pointNearCursor(u, lanes) {
  const { idx, left, top } = u.cursor;
  if (idx === null || idx === undefined || left < 0) return -1;
  if (Math.abs(u.valToPos(u.data[0][idx], "x") - left) > PICK_PX) return -1;
  for (let s = 1; s <= lanes; s++) {
    const v = u.data[s][idx];
    if (v !== null && v !== undefined && Math.abs(u.valToPos(v, "y") - top) <= PICK_PX) return s;
  }
  return -1;
}

/** Rates that double (0.5, 1, 2, 4 …) read best on a log-2 axis, where each doubling is one step to the right. */
function logScale(rates) {
  return rates.length > 2 && rates[0] > 0 && rates[rates.length - 1] / rates[0] >= 4;
}

function options(chart, lanes, slo, width, rates) {
  const fmt = chart.format;
  const series = [{ label: "rate", value: (u, v) => (v === null || v === undefined ? "\u2013" : `${v} req/s`) }];
  lanes.forEach((name, i) => {
    const style = LANE_STYLE[i % LANE_STYLE.length];
    series.push({ label: name, stroke: style.stroke, dash: style.dash, width: 2, spanGaps: false,
      points: { show: true, size: 9, width: 2, stroke: style.stroke, fill: "#ffffff" },
      value: (u, v) => (v === null || v === undefined ? "\u2013" : fmt(v)) });
  });
  if (slo !== null) {
    series.push({ label: `SLO ${fmt(slo)}`, stroke: SLO_STROKE, dash: [6, 4], width: 1.5, points: { show: false },
      value: () => fmt(slo) });
  }
  const axis = { stroke: INK, font: FONT, labelFont: FONT, grid: { stroke: RULE, width: 1 }, ticks: { stroke: RULE, width: 1 } };
  return {
    width, height: HEIGHT, series,
    scales: { x: logScale(rates) ? { time: false, distr: 3, log: 2, range: (u, min, max) => [min / 1.3, max * 1.3] }
      : { time: false, range: (u, min, max) => padded(min, max) },
      y: { range: (u, min, max) => [0, max === null || max <= 0 ? 1 : max * 1.12] } },
    axes: [{ ...axis, label: "request rate (req/s)", labelSize: 24, splits: () => rates,
      values: (u, splits) => splits.map((v) => String(v)) },  // a tick at every rate swept, nowhere else
      { ...axis, label: chart.yLabel, labelSize: 24, size: 64 }],
    cursor: { drag: { x: false, y: false, setScale: false }, focus: { prox: 24 } },
    focus: { alpha: 0.35 },
    legend: { show: true, live: false,
      markers: { dash: (u, i) => (u.series[i].dash && u.series[i].dash.length ? "dashed" : "solid") } },
    hooks: {
      setCursor: [(u) => { u.over.style.cursor = pointNearCursor(u, lanes.length) > 0 ? "pointer" : ""; }],
      ready: [(u) => u.over.addEventListener("click", () => {
        const s = pointNearCursor(u, lanes.length);
        if (s > 0) chart.onPick(u.data[0][u.cursor.idx]);
      })],
    },
  };
}

/** Bring the chart up to date with `series` ({rates, lanes: [{name, values}]}) and an optional SLO line. */
export function syncChart(chart, series, slo = null) {
  const width = Math.max(240, Math.floor(chart.container.clientWidth));
  const lanes = series.lanes.map((l) => l.name);
  const shape = JSON.stringify([lanes, series.rates, slo]);
  const data = [series.rates, ...series.lanes.map((l) => l.values)];
  if (slo !== null) data.push(series.rates.map(() => slo));
  if (!series.rates.length || !lanes.length) {
    if (chart.plot) chart.plot.destroy();
    Object.assign(chart, { plot: null, shape: "", data: null, lanes: [], slo: null });
    return;
  }
  if (shape !== chart.shape) {
    if (chart.plot) chart.plot.destroy();
    chart.plot = new window.uPlot(options(chart, lanes, slo, width, series.rates), data, chart.container);
    Object.assign(chart, { shape, data, lanes, slo });
    return;
  }
  if (JSON.stringify(data) !== JSON.stringify(chart.data)) {
    chart.plot.setData(data);
    chart.data = data;
  }
  if (chart.plot.width !== width) chart.plot.setSize({ width, height: HEIGHT });
}

/** What a chart draws, for the probe: its lane series and their values, the SLO line, its size. */
export function describeChart(chart) {
  const u = chart.plot;
  if (!u) return { drawn: false, series: [], rates: [], slo: null };
  return {
    drawn: true, width: u.width, height: u.height, rates: [...u.data[0]], slo: chart.slo,
    series: chart.lanes.map((name, i) => ({ name, stroke: LANE_STYLE[i % LANE_STYLE.length].stroke, values: [...u.data[i + 1]] })),
    legend: [...chart.container.querySelectorAll(".u-legend .u-series .u-label")].map((n) => n.textContent),
  };
}

/** Where the point of `lane` at `rate` sits, in page CSS pixels (for a test's click), or null. */
export function pointPosition(chart, lane, rate) {
  const u = chart.plot;
  if (!u) return null;
  const s = chart.lanes.indexOf(lane) + 1;
  const i = u.data[0].indexOf(rate);
  if (s < 1 || i < 0 || u.data[s][i] === null) return null;
  const box = u.over.getBoundingClientRect();
  return { x: box.left + window.scrollX + u.valToPos(u.data[0][i], "x"), y: box.top + window.scrollY + u.valToPos(u.data[s][i], "y") };
}
