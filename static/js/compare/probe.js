/**
 * window.__compare: what the compare page shows, as data, for tests and for anyone curious in the
 * console — the status, both runs, the lanes in page order, the layout (each lane's rectangles and each
 * run's heading band, in canvas CSS pixels), the metrics computed here and their B − A differences,
 * and the shared clock (playhead, limit, domain). Tests wait on it, never on a sleep.
 */
import { pairedLanes } from "./runs.js";
import { COLUMNS, differences } from "./table.js";
import { cellRect } from "../canvas/layout.js";

function numbers(m) {
  return Object.fromEntries(Object.entries(m).filter(([key]) => key !== "requests"));
}

function metricsOf(sides) {
  return Object.fromEntries(sides.map((s) => [s.label, Object.fromEntries(Object.entries(s.derived.metrics)
    .map(([lane, m]) => [lane, numbers(m)]))]));
}

function diffsOf(sides) {
  const out = {};
  for (const { name, sides: have } of pairedLanes(sides)) {
    if (have.length === 2) out[name] = differences(...sides.map((s) => s.derived.metrics[name]));
  }
  return out;
}

export function exposeCompareProbe({ page, sides, pb, shown, limit, domain, layout, scene, canvas }) {
  const rect = canvas.getBoundingClientRect();
  window.__compare = {
    status: page.status,
    message: page.message,
    ids: [...page.ids],
    missing: [...page.missing],
    runs: (sides || []).map((s) => ({ label: s.label, id: s.id, name: s.run.workload.name, model: s.model, created: s.created,
      lanes: s.derived.lanes.map((l) => l.name), steps: Math.max(...s.derived.lanes.map((l) => l.records.length)),
      end_ms: Math.max(...s.derived.lanes.map((l) => l.timeline.end[l.timeline.end.length - 1])),
      timed: s.derived.timed, check: s.derived.check })),
    order: layout ? layout.lanes.map((l) => l.name) : [],
    lanes: Object.fromEntries((scene ? scene.lanes : []).map((l) => [l.name, { side: l.side, lane: l.lane, title: l.title,
      steps: l.records.length, stepAtPlayhead: l.step }])),
    columns: COLUMNS.map(([key]) => key),
    metrics: sides ? metricsOf(sides) : {},
    diffs: sides ? diffsOf(sides) : {},
    clock: pb.clock, playhead: pb.t, shown, playing: pb.playing, speed: pb.speed, view: scene ? scene.view : null,
    limit, domain,
    layout: layout ? {
      width: layout.width, height: layout.height, dpr: window.devicePixelRatio || 1,
      canvas: { left: rect.left + window.scrollX, top: rect.top + window.scrollY, width: rect.width, height: rect.height },
      axis: layout.axis, legend: layout.legend,
      groups: layout.groups.map((g) => ({ side: g.side, band: g.band, lanes: [...g.lanes] })),
      lanes: layout.lanes.map((l) => ({ name: l.name, side: l.side, title: l.title, marks: l.marks, grid: l.grid, kv: l.kv,
        rowH: l.rowH, rows: l.rows.length })),
    } : null,
    /** A cell's rectangle in canvas CSS pixels ("A · static", step 1-based, row 0-based), or null. */
    cellRect(lane, step, row) {
      const placed = layout && layout.lanes.find((l) => l.name === lane);
      return placed ? cellRect(layout, placed, step, row) : null;
    },
  };
}
