/**
 * The page's run state: one plain object, changed only by pure functions that return a new object.
 * `applyEvent` folds a queued socket event (or a page action) in; `applyStep` folds one tick's step
 * records into a run. Nothing here knows about the canvas, the DOM or the playback clock.
 */
import { ConnectionEvent, RunStatus, ServerEvent } from "./vocab.js";

/** Page actions that change the run state (next to the server's events). */
export const Action = Object.freeze({
  SUBMITTED: "submitted",   // the page sent a submit; the current run stays until the new one is queued
  WATCHING: "watching",     // the page asked to watch a run by id
});

export function createState() {
  return {
    connected: false,
    model: { ready: false, progress: 0, message: "connecting to the server", error: null, model: "", device: "" },
    pending: false,   // a submit awaits its run_queued / run_started / run_error
    run: null,        // see newRun
    error: null,      // the last run_error: {message, field, run_id}
  };
}

function newRun(id, status) {
  return {
    id,
    status,
    own: false,           // this page submitted it (the server allows one run per client at a time)
    position: null,       // place in the server's queue while queued (1 = next)
    lanes: [],            // lane names in the server's order
    workload: null,       // the workload as the server started it
    model: "",
    t: 0,                 // last tick folded in
    records: {},          // lane -> [step record, ...] (record i is step i + 1)
    done: {},             // lane -> true once its last step arrived
    serverMetrics: null,  // run_finished.metrics
  };
}

/** Fold one tick (`{t, lanes: {lane: record | null}}`) into a run; a tick already seen (a rejoin replays them) is ignored. */
export function applyStep(run, tick) {
  if (tick.t <= run.t) return run;
  const records = { ...run.records };
  const done = { ...run.done };
  for (const [lane, record] of Object.entries(tick.lanes || {})) {
    if (record === null) done[lane] = true;
    else records[lane] = [...(records[lane] || []), record];
  }
  return { ...run, t: tick.t, records, done, status: RunStatus.RUNNING };
}

function sameRun(state, runId) {
  return state.run !== null && state.run.id === runId;
}

/** Fold one queued event `{type, payload}` into the state. */
export function applyEvent(state, event) {
  const p = event.payload;
  switch (event.type) {
    case ConnectionEvent.CONNECTED:
      return { ...state, connected: true };
    case ConnectionEvent.DISCONNECTED:
      return { ...state, connected: false };
    case ServerEvent.MODEL_STATUS:
      return { ...state, model: { ...state.model, ...p } };
    case Action.SUBMITTED:
      return { ...state, pending: true, error: null };
    case Action.WATCHING:
      return sameRun(state, p.run_id) ? state : { ...state, error: null, run: newRun(p.run_id, RunStatus.QUEUED) };
    case ServerEvent.RUN_QUEUED: {
      const run = sameRun(state, p.run_id) ? state.run : newRun(p.run_id, RunStatus.QUEUED);
      const own = run.own || state.pending;
      return { ...state, pending: false, run: { ...run, own, status: RunStatus.QUEUED, position: p.position } };
    }
    case ServerEvent.RUN_STARTED: {
      // A rejoin (same id) keeps what arrived so far; the replayed ticks are then skipped by `t`.
      const base = sameRun(state, p.run_id) && state.run.workload ? state.run : newRun(p.run_id, RunStatus.RUNNING);
      const run = { ...base, status: base.status === RunStatus.FINISHED ? base.status : RunStatus.RUNNING,
        position: null, lanes: [...p.lanes], workload: p.workload, model: p.model || "" };
      return { ...state, pending: false, run };
    }
    case ServerEvent.TICK:
      return sameRun(state, p.run_id) ? { ...state, run: applyStep(state.run, p) } : state;
    case ServerEvent.RUN_FINISHED: {
      if (!sameRun(state, p.run_id)) return state;
      const done = Object.fromEntries(state.run.lanes.map((lane) => [lane, true]));
      return { ...state, run: { ...state.run, status: RunStatus.FINISHED, done, serverMetrics: p.metrics } };
    }
    case ServerEvent.RUN_ERROR: {
      const error = { message: String(p.message || "error"), field: p.field || null, run_id: p.run_id || null };
      // A finished run stays finished (e.g. it ran but could not be stored); a live or queued one ends here.
      const ends = p.run_id && sameRun(state, p.run_id) && state.run.status !== RunStatus.FINISHED;
      const run = ends ? { ...state.run, status: RunStatus.ERROR } : state.run;
      return { ...state, pending: false, error, run };
    }
    default:
      return state;
  }
}
