/**
 * window.__sweep: what the sweep page shows, as data, for tests and for anyone curious in the
 * console — the sweep's status, progress and points, the form's errors, what each chart draws, and
 * where a chart's point sits (to click it). Tests wait on it, never on a sleep.
 */
import { describeChart, pointPosition } from "./chart.js";
import { canCancel } from "./state.js";

export function exposeSweepProbe({ state, errors, charts, dom }) {
  const s = state.sweep;
  window.__sweep = {
    status: s ? (s.cancelling && s.status === "running" ? "cancelling" : s.status) : state.pending ? "submitting" : "idle",
    sweepId: s ? s.id : null,
    own: Boolean(s && s.own),
    connected: state.connected,
    model: { ...state.model },
    progress: s ? { fraction: s.fraction, rate: s.rate, done: s.points.length, total: s.rates.length,
      bar: Number(dom.progress.value) } : null,
    rates: s ? [...s.rates] : [],
    lanes: s ? [...s.lanes] : [],
    slo: s ? { ...s.slo } : null,
    simulated: Boolean(s && s.simulated),
    simulatedBanner: dom.simBanner.hidden ? "" : dom.simBanner.textContent,
    tableCaption: dom.table.caption ? dom.table.caption.textContent : "",
    captions: { ttft: dom.ttftCaption.textContent, goodput: dom.goodputCaption.textContent },
    groupNote: dom.groupNote.hidden ? "" : dom.groupNote.textContent,
    points: s ? s.points.map((p) => ({ rate: p.rate, point_run_id: p.point_run_id, lanes: p.lanes })) : [],
    error: state.error,
    errors: errors.map((e) => ({ ...e })),
    canCancel: canCancel(state),
    canSubmit: !dom.run.disabled,
    rows: dom.table.querySelectorAll("tbody tr[data-lane]").length,
    charts: { ttft: describeChart(charts.ttft), goodput: describeChart(charts.goodput) },
    /** A point of `lane` at `rate` on chart `name` ("ttft" | "goodput"), in page CSS pixels, or null. */
    pointAt: (name, lane, rate) => pointPosition(charts[name], lane, rate),
  };
}
