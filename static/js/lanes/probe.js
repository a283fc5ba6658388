/**
 * window.__lanes: what the page shows, as data, for tests and for anyone curious in the console —
 * run status (and whether the run is this page's own), per-lane configuration, clock (step starts and
 * ends, gaps, waits), arrivals, metrics (the run's, and at the playhead) and KV series, the caption
 * each lane shows, the playhead, and the layout (where each lane, row, step cell, wait, arrival mark
 * and legend item sits, in CSS pixels relative to the canvas, with the type scale it draws in, the
 * part of the run the x-axis shows, and each preemption's flag), and the teaching modes (presenter,
 * predict-then-reveal, zoom), and every text the canvas drew with the font size it drew it in (`labels`:
 * renderer.js returns them), and the SLO the frame holds the run to with its marks as drawn. Tests wait on it, never on
 * a sleep.
 */
import { cellRect, columnRect, flagRects, gapRect, markX, timeX } from "../canvas/layout.js";
import { transferBand } from "../canvas/pdlanes.js";
import { loadBars } from "../canvas/cells.js";
import { splitBars } from "../core/tpsplit.js";
import { PALETTE, loadSpans, sloMarks } from "../canvas/renderer.js";

function withoutRequests(m) {
  const { requests, ...rest } = m;
  return { ...rest, requests: Object.fromEntries(Object.entries(requests).map(([id, q]) => [id,
    { arrival: q.arrival, arrival_ms: q.arrival_ms, ttft_steps: q.ttft_steps, latency_steps: q.latency_steps,
      ttft_ms: q.ttft_ms, queue_ms: q.queue_ms, tokens: q.tokens, stop: q.stop, text: q.text }])) };
}

export function exposeProbe({ state, pb, ui, derived, layout, scene, shown, limit, narration, canvas, revealed = true,
  axis = null, labels = [] }) {
  const run = state.run;
  const lanes = {};
  for (const lane of derived.lanes) {
    const { kv, starts, ends, gaps, waits, arrivals } = lane.timeline;
    const shownLane = (scene.rows || scene.lanes).find((l) => l.name === lane.name) || {};
    lanes[lane.name] = {
      policy: lane.policy,
      title: lane.title,
      options: lane.config.options,
      steps: lane.records.length,
      done: lane.done,
      starts, ends, gaps, waits: [...waits], arrivals,
      metrics: withoutRequests(derived.metrics[lane.name]),
      kv: { unit: kv.length ? kv[0].unit : null, used: kv.map((p) => p.used), total: kv.map((p) => p.total) },
      stepAtPlayhead: shownLane.step,
      metricsAtPlayhead: shownLane.metrics ? withoutRequests(shownLane.metrics) : null,
      caption: shownLane.caption,
      // a fleet (data_parallel_size): the sub-lanes drawn for its replicas, each a lane of `drawn`
      replicas: derived.drawn.filter((l) => l.fleet === lane.name).map((l) => l.name),
    };
  }
  const laneLayout = (name) => layout.lanes.find((l) => l.name === name);
  const rect = canvas.getBoundingClientRect();
  window.__lanes = {
    // "submitting" while a mix waits to go (or its submit awaits an answer), even when an older run is on screen
    status: state.pending || state.next ? "submitting" : run ? run.status : "idle",
    runId: run ? run.id : null,
    own: Boolean(run && run.own),
    mix: run && run.workload ? run.workload.name : null,
    connected: state.connected,
    model: { ...state.model },
    error: state.error,
    ticks: run ? run.t : 0,
    playhead: pb.t, shown, playing: pb.playing, speed: pb.speed, clock: pb.clock, view: ui.view, limit,
    metricsCheck: derived.check,
    order: derived.lanes.map((l) => l.name),
    /** The lanes the canvas draws: `order`, with each fleet as its replicas' sub-lanes ("<fleet>/<i>"). */
    drawn: derived.drawn.map((l) => ({ name: l.name, fleet: l.fleet ?? null, replica: l.replica ?? null, steps: l.records.length,
      caption: (scene.lanes.find((s) => s.name === l.name) || {}).caption })),
    lanes,
    narration,
    palette: PALETTE,
    present: Boolean(ui.present), reveal: Boolean(ui.reveal), revealed,
    zoom: ui.zoom ? { ...ui.zoom } : null,
    /** The x-axis: `full` the span before any zoom (under predict-then-reveal, one that grows with the playhead), `from`/`span` what it shows. */
    axis: axis ? { ...axis } : null,
    layout: {
      width: layout.width, height: layout.height, dpr: window.devicePixelRatio || 1, type: layout.type,
      domain: layout.domain, origin: layout.origin || 0, axis: layout.axis,
      /** presenter mode's lanes in turn: {from, count, total} (count < total: the others wait their turn); null outside it */
      turn: layout.turn ? { ...layout.turn } : null,
      canvas: { left: rect.left + window.scrollX, top: rect.top + window.scrollY },
      lanes: layout.lanes.map((l) => ({ name: l.name, title: l.title, marks: l.marks, flags: l.flags, grid: l.grid, load: l.load, kv: l.kv,
        split: l.split, note: l.note, rowH: l.rowH, rows: l.rows.length })),
    },
    /** The SLO's targets in force ({ttft_ms, tpot_ms}: the teacher's, else the run's), or null. */
    slo: scene.sloTargets || null,
    /** A lane's SLO marks as drawn (renderer.js sloMarks): {deadlines: [{id, x, y, h}], misses: [{id, miss, step, x, y, w, h}]}. */
    sloMarks(lane) {
      const l = laneLayout(lane);
      const data = scene.lanes.find((d) => d.name === lane);
      return l && data ? sloMarks(layout, l, data, scene.view, Math.min(data.records.length, data.revealed)) : { deadlines: [], misses: [] };
    },
    /** A fleet replica's load bars as drawn (cells.js loadBars): [{step, load, x, y, w, h}]; empty for a lane of one engine. */
    loadBars(lane) {
      const l = laneLayout(lane);
      const data = scene.lanes.find((d) => d.name === lane);
      if (!l || !l.load || !l.load.h || !data || !data.loads) return [];
      return loadBars(l.load, loadSpans(layout, l, Math.min(data.records.length, data.revealed)), data.loads, data.loadMax);
    },
    /** A tensor-parallel lane's step bars as drawn (core/tpsplit.js splitBars): [{step, kind, x, w, ms, y, h}]; empty
     * for a lane of one process. */
    splitBars(lane) {
      const l = laneLayout(lane);
      const data = scene.lanes.find((d) => d.name === lane);
      if (!l || !l.split || !l.split.h || !data) return [];
      return splitBars(loadSpans(layout, l, Math.min(data.records.length, data.revealed)), data.records)
        .map((b) => ({ ...b, y: l.split.y, h: l.split.h }));
    },
    /** A lane's preemption flags as drawn: [{id, step, pill: {x, y, w, h}, pole: {...}}] (empty: it cannot preempt). */
    preemptions(lane) {
      const l = laneLayout(lane);
      const data = derived.drawn.find((d) => d.name === lane);
      if (!l || !data || !l.flags || !l.flags.h) return [];
      return data.timeline.preemptions.map((p) => ({ id: p.id, step: p.step, ...flagRects(layout, l, p) }));
    },
    /** Every text the last frame drew: [{kind ("cell", "kv", "row", "axis", "title", "flag", "legend"), text, px, x, y}]. */
    labels: labels.map((l) => ({ ...l })),
    /** The legend's items as drawn: [{label, x, y, w, h}] in canvas CSS pixels. */
    legend: (layout.legend.items || []).map((i) => ({ label: i.label, x: i.x, y: layout.legend.y + i.y, w: i.w, h: i.h })),
    /** A cell's rectangle in canvas CSS pixels (step 1-based, row 0-based). */
    cellRect: (lane, step, row) => cellRect(layout, laneLayout(lane), step, row),
    /** The first cell of a lane in the slot view whose state is `slotState`: {step, row, x, y, w, h} or null. */
    findCell(lane, slotState) {
      const data = derived.drawn.find((l) => l.name === lane);
      if (!data) return null;
      for (const r of data.records) {
        const row = r.slots.findIndex((c) => c.state === slotState);
        if (row >= 0) return { step: r.step, row, ...cellRect(layout, laneLayout(lane), r.step, row) };
      }
      return null;
    },
    /** A lane's widest wait for arrivals on the ms clock: {step, from, to, x, y, w, h}, or null. */
    findGap(lane) {
      const data = derived.drawn.find((l) => l.name === lane);
      const gaps = data ? [...data.timeline.gaps].sort((a, b) => (b.to - b.from) - (a.to - a.from)) : [];
      const r = gaps.length && gapRect(layout, laneLayout(lane), gaps[0]);
      return r ? { ...gaps[0], ...r } : null;
    },
    /** The first step of a lane that computed nothing (drawn as waiting): {step, x, y, w, h}, or null. */
    findWait(lane) {
      const data = derived.drawn.find((l) => l.name === lane);
      const step = data && Math.min(...data.timeline.waits);
      return Number.isFinite(step) ? { step, ...columnRect(layout, laneLayout(lane), step) } : null;
    },
    /** A lane's arrival marks as drawn: [{id, arrival_ms, x, y, h}] (empty when the lane shows none); a fleet replica's
     * are the router's decisions, with `replica` and `branch`; a P/D decode engine's its hand-offs, with `transfer` and the
     * band its copy is drawn as (`band`: {x, w}, canvas/pdlanes.js transferBand). */
    marks(lane) {
      const l = laneLayout(lane);
      const data = derived.drawn.find((d) => d.name === lane);
      if (!l || !data || !l.marks.h) return [];
      return data.timeline.arrivals.map((a) => ({ id: a.id, arrival_ms: a.arrival_ms, x: markX(layout, a), y: l.marks.y, h: l.marks.h,
        ...(a.branch ? { replica: a.replica, branch: a.branch } : {}),
        ...(a.transfer ? { transfer: a.transfer, band: transferBand((ms) => timeX(layout, ms), l.marks, a.transfer) } : {}) }));
    },
  };
}
