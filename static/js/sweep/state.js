/**
 * The sweep page's state: one plain object, changed only by `applySweepEvent`, a pure function that
 * folds a queued socket event (or a page action) in and returns a new object. It knows the sweep
 * protocol (app/runs/sweeps.py) and nothing of the form, the charts or the DOM. `seriesOf` turns the
 * points into one line per lane, the numbers both the charts and the probe use.
 */
import { ConnectionEvent, ServerEvent } from "../core/vocab.js";

/** Socket events of a load sweep the server sends (app/protocol.py), next to vocab.js's ServerEvent. */
export const SweepEvent = Object.freeze({
  SWEEP_STARTED: "sweep_started",
  SWEEP_PROGRESS: "sweep_progress",
  SWEEP_POINT: "sweep_point",
  SWEEP_FINISHED: "sweep_finished",
});

/** Socket events the sweep page sends. */
export const SweepClientEvent = Object.freeze({ SWEEP: "sweep", CANCEL: "cancel", WATCH: "watch" });

/** A sweep's life on the page. */
export const SweepStatus = Object.freeze({
  QUEUED: "queued",
  RUNNING: "running",
  FINISHED: "finished",
  CANCELLED: "cancelled",
  ERROR: "error",
});

/** Page actions that change the state (next to the server's events). */
export const SweepAction = Object.freeze({
  SUBMITTED: "submitted",      // the page sent a sweep; it awaits run_queued or run_error
  CANCEL_SENT: "cancel-sent",  // the page asked to cancel its sweep
  WATCHING: "watching",        // the page asked to watch a sweep by id
});

export function createSweepState() {
  return {
    connected: false,
    model: { ready: false, progress: 0, message: "connecting to the server", error: null, model: "", device: "" },
    pending: false,  // a sweep was sent and awaits run_queued or run_error
    sweep: null,     // see newSweep
    error: null,     // the last run_error: {message, field, run_id, code}
  };
}

function newSweep(id) {
  return {
    id,
    status: SweepStatus.QUEUED,
    own: false,          // this connection submitted it (only the submitter may cancel)
    cancelling: false,   // a cancel was sent and not yet answered
    position: null,      // place in the engine's queue (1 = next) while queued
    rates: [],           // every rate the sweep runs, lowest first
    lanes: [],           // lane names in the server's order
    laneConfigs: [],     // the lanes as configurations (names or {name, policy, ...})
    workload: null,      // the mix as submitted
    model: "",
    simulated: false,    // run on the step-clock simulator (backend "sim"): every figure is the cost model's
    slo: { ttft_ms: null, tpot_ms: null },
    burstiness: null,
    fraction: 0,         // 0..1 of the tokens the sweep writes
    rate: null,          // the rate now running
    points: [],          // [{rate, lanes: {lane: serving metrics}, point_run_id}], lowest rate first
    notSweep: false,     // the watched id turned out to be an ordinary run
    reason: "",          // why it ended, when it was cancelled or failed
  };
}

/** `points` with `point` in its place (a rejoin replays points already seen: the same rate replaces). */
function withPoint(points, point) {
  const clean = { rate: point.rate, lanes: point.lanes || {}, point_run_id: point.point_run_id || null };
  return [...points.filter((p) => p.rate !== clean.rate), clean].sort((a, b) => a.rate - b.rate);
}

function isLive(sweep) {
  return sweep !== null && (sweep.status === SweepStatus.QUEUED || sweep.status === SweepStatus.RUNNING);
}

/** Whether this page may cancel its sweep now. */
export function canCancel(state) {
  return state.connected && isLive(state.sweep) && state.sweep.own && !state.sweep.cancelling;
}

/** Whether the server would take a new sweep from this page now, or why not. */
export function whyNotSubmit(state) {
  if (!state.connected) return "not connected to the server";
  if (state.model.error) return "the model could not be loaded";
  if (!state.model.ready) return "the model is still loading";
  if (state.pending || (isLive(state.sweep) && state.sweep.own)) return "wait for your sweep to finish (or cancel it)";
  return "";
}

function onError(state, p) {
  const error = { message: String(p.message || "error"), field: p.field || null, run_id: p.run_id || null,
    code: p.code || null };
  const sweep = state.sweep;
  if (!sweep || error.run_id !== sweep.id) return { ...state, pending: false, error };
  if (sweep.cancelling && error.code === "not_found") {  // the cancel was refused: the sweep goes on
    return { ...state, error, sweep: { ...sweep, cancelling: false } };
  }
  if (sweep.status === SweepStatus.FINISHED) return { ...state, error };
  const status = error.code === "cancelled" ? SweepStatus.CANCELLED : SweepStatus.ERROR;
  return { ...state, pending: false, error, sweep: { ...sweep, status, cancelling: false, reason: error.message } };
}

/** Fold one queued event `{type, payload}` into the state. */
export function applySweepEvent(state, event) {
  const p = event.payload || {};
  const sweep = state.sweep;
  const same = sweep !== null && sweep.id === p.run_id;
  switch (event.type) {
    case ConnectionEvent.CONNECTED:
      return { ...state, connected: true };
    case ConnectionEvent.DISCONNECTED:
      // the server knows a submitter by its connection: after a reconnect the sweep is no longer ours to cancel
      return { ...state, connected: false, pending: false, sweep: sweep && { ...sweep, own: false, cancelling: false } };
    case ServerEvent.MODEL_STATUS:
      return { ...state, model: { ...state.model, ...p } };
    case SweepAction.SUBMITTED:
      return { ...state, pending: true, error: null };
    case SweepAction.CANCEL_SENT:
      return sweep ? { ...state, error: null, sweep: { ...sweep, cancelling: true } } : state;
    case SweepAction.WATCHING:
      return same ? state : { ...state, error: null, sweep: newSweep(p.run_id) };
    case ServerEvent.RUN_QUEUED: {
      if (!same && !state.pending) return state;  // not ours to show
      const base = same ? sweep : newSweep(p.run_id);
      return { ...state, pending: false, error: same ? state.error : null,
        sweep: { ...base, own: base.own || state.pending, status: SweepStatus.QUEUED, position: p.position } };
    }
    case SweepEvent.SWEEP_STARTED: {
      if (!same) return state;
      return { ...state, sweep: { ...sweep, status: sweep.status === SweepStatus.FINISHED ? sweep.status : SweepStatus.RUNNING,
        position: null, rates: [...(p.rates || [])], lanes: [...(p.lanes || [])], laneConfigs: [...(p.lane_configs || [])],
        workload: p.workload || null, model: p.model || "", simulated: Boolean(p.simulated), burstiness: p.burstiness ?? null,
        slo: { ttft_ms: p.slo_ttft_ms ?? null, tpot_ms: p.slo_tpot_ms ?? null } } };
    }
    case SweepEvent.SWEEP_PROGRESS:
      if (!same || sweep.status === SweepStatus.FINISHED) return state;
      return { ...state, sweep: { ...sweep, status: SweepStatus.RUNNING, fraction: Math.max(sweep.fraction, Number(p.fraction) || 0),
        rate: p.rate ?? sweep.rate } };
    case SweepEvent.SWEEP_POINT: {
      if (!same) return state;
      const points = withPoint(sweep.points, p);
      const next = sweep.rates.find((r) => !points.some((q) => q.rate === r));
      return { ...state, sweep: { ...sweep, points, rate: next ?? null } };
    }
    case SweepEvent.SWEEP_FINISHED: {
      if (!same) return state;
      const points = (p.points || []).reduce(withPoint, []);
      return { ...state, pending: false, sweep: { ...sweep, status: SweepStatus.FINISHED, points, fraction: 1, rate: null,
        cancelling: false } };
    }
    case ServerEvent.RUN_STARTED:
      // a watched id that is an ordinary run, not a sweep: say so and link to it
      return same ? { ...state, sweep: { ...sweep, status: SweepStatus.ERROR, notSweep: true } } : state;
    case ServerEvent.RUN_ERROR:
      return onError(state, p);
    default:
      return state;
  }
}

/** One line per lane for `key` (a serving metric such as "p95_ttft_ms"): values at every rate, null where no point yet. */
export function seriesOf(sweep, key) {
  if (!sweep) return { rates: [], lanes: [] };
  const rates = sweep.rates.length ? sweep.rates : sweep.points.map((p) => p.rate);
  const byRate = new Map(sweep.points.map((p) => [p.rate, p]));
  const names = sweep.lanes.length ? sweep.lanes : Object.keys((sweep.points[0] || {}).lanes || {});
  return {
    rates,
    lanes: names.map((name) => ({ name, values: rates.map((r) => {
      const lane = byRate.has(r) ? byRate.get(r).lanes[name] : null;
      const value = lane ? lane[key] : null;
      return typeof value === "number" && Number.isFinite(value) ? value : null;
    }) })),
  };
}
