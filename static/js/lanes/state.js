/**
 * The page's run state: one plain object, changed only by pure functions that return a new object.
 * `applyEvent` folds a queued socket event (or a page action) in; `applyStep` folds one tick's step
 * records into a run; `nextSend` says what the page must send next for its own run. Nothing here
 * knows about the canvas, the DOM or the playback clock.
 *
 * Cancel and replace: the server runs one run per client. A mix asked for while your own run is
 * queued or running waits in `next`; the page cancels that run and submits `next` once the server
 * confirms (the cancelled run's run_error, or its run_finished when it ended first). So there is
 * never more than one submit in flight and never one the server must refuse.
 */
import { ConnectionEvent, RunStatus, ServerEvent } from "../core/vocab.js";

/** Page actions that change the run state (next to the server's events). */
export const Action = Object.freeze({
  WANTED: "wanted",         // the reader asked to run a mix: {workload, lanes}; it waits in `next` until it can go
  SUBMITTED: "submitted",   // the page sent `next` as a submit; the current run stays until the new one is queued
  CANCELLING: "cancelling", // the page sent a cancel for its own run {run_id}, to replace it with `next`
  WATCHING: "watching",     // the page asked to watch a run by id (our own run, if shown, is kept in `mine`)
  SHOW_MINE: "show-mine",   // show our own run again (kept in `mine` while the page followed another)
});

export function createState() {
  return {
    connected: false,
    model: { ready: false, progress: 0, message: "connecting to the server", error: null, model: "", device: "" },
    pending: false,   // a submit awaits its run_queued / run_started / run_error
    sent: null,       // {workload, lanes} of that submit, so a refusal can name what it refused
    next: null,       // {workload, lanes}: a mix to submit as soon as no run of ours is live
    cancelling: null, // id of our run a cancel was sent for, until the server confirms it ended
    dropped: [],      // ids of runs we cancelled: their run_error is expected and never shown
    run: null,        // see newRun: the run the page shows
    mine: null,       // our own run while the page shows another (a student following the teacher's run): it stays
                      // one click away, and its events still fold into it
    error: null,      // the last run_error: {message, field, run_id, code, refused (the name of the mix a refused
                      // submit asked for, or null)}
  };
}

function newRun(id, status) {
  return {
    id,
    status,
    own: false,           // this page submitted it (the server allows one run per client at a time)
    name: null,           // our own run's mix name as submitted (known before run_started brings its workload)
    position: null,       // place in the server's queue while queued (1 = next)
    ahead: null,          // a class's run: {teacher, student, other} runs queued ahead of it (class.js words it)
    lanes: [],            // lane names in the server's order
    workload: null,       // the workload as the server started it
    model: "",
    t: 0,                 // last tick folded in
    records: {},          // lane -> [step record, ...] (record i is step i + 1)
    done: {},             // lane -> true once its last step arrived
    serverMetrics: null,  // run_finished.metrics
  };
}

/** Whether a run is still queued or running on the server. */
export function isLive(run) {
  return Boolean(run) && (run.status === RunStatus.QUEUED || run.status === RunStatus.RUNNING);
}

/** Our own run, while it is queued or running (the server refuses another submit until it ends), or null: the run
 * shown, or the one kept in `mine` while the page shows another. */
export function liveOwnRun(state) {
  if (state.run && state.run.own && isLive(state.run)) return state.run;
  return state.mine && isLive(state.mine) ? state.mine : null;
}

/**
 * What the page must send now: `{type: "submit", workload, lanes}`, `{type: "cancel", runId}` (our live run stands
 * in the way of `next`), or null (nothing wanted, or waiting for the server's answer).
 */
export function nextSend(state) {
  if (!state.next || !state.connected || !state.model.ready) return null;
  const own = liveOwnRun(state);
  if (own) return state.cancelling === own.id ? null : { type: "cancel", runId: own.id };
  if (state.pending) return null;  // its run_queued makes it our live run, which is then cancelled
  return { type: "submit", workload: state.next.workload, lanes: state.next.lanes };
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

/** A run_error for a run we cancelled: it ends that run quietly and frees us to submit `next`. */
function dropped(state, p) {
  const ends = sameRun(state, p.run_id) && isLive(state.run);
  return { ...state, cancelling: state.cancelling === p.run_id ? null : state.cancelling,
    run: ends ? { ...state.run, status: RunStatus.CANCELLED } : state.run };
}

const RUN_EVENTS = new Set([ServerEvent.RUN_QUEUED, ServerEvent.RUN_STARTED, ServerEvent.TICK, ServerEvent.RUN_FINISHED,
  ServerEvent.RUN_ERROR, ServerEvent.RUN_PAUSED]);

/** Fold one queued event `{type, payload}` into the state; an event of our own run kept in `mine` folds into it. */
export function applyEvent(state, event) {
  const id = event.payload && event.payload.run_id;
  if (state.mine && id && id === state.mine.id && !sameRun(state, id) && RUN_EVENTS.has(event.type)) {
    const inner = fold({ ...state, run: state.mine }, event);
    // a refusal or a stop of our kept run (the teacher cancelled it) is said beside it, not over the run on screen
    const mine = event.type === ServerEvent.RUN_ERROR ? { ...inner.run, ended: String(event.payload.message || "") } : inner.run;
    return { ...inner, run: state.run, mine, error: state.error };
  }
  return fold(state, event);
}

function fold(state, event) {
  const p = event.payload;
  switch (event.type) {
    case ConnectionEvent.CONNECTED:
      return { ...state, connected: true };
    case ConnectionEvent.DISCONNECTED:
      return { ...state, connected: false };
    case ServerEvent.MODEL_STATUS:
      return { ...state, model: { ...state.model, ...p } };
    case Action.WANTED:
      return { ...state, next: { workload: p.workload, lanes: p.lanes } };
    case Action.SUBMITTED:
      return { ...state, pending: true, sent: state.next, next: null, error: null };
    case Action.CANCELLING:
      return { ...state, cancelling: p.run_id, dropped: [...state.dropped.slice(-20), p.run_id] };
    case Action.WATCHING: {
      if (sameRun(state, p.run_id)) return state;
      if (state.mine && state.mine.id === p.run_id) return { ...state, error: null, run: state.mine, mine: null };
      const mine = state.run && state.run.own ? state.run : state.mine;  // our own run stays one click away
      return { ...state, error: null, mine, run: newRun(p.run_id, RunStatus.QUEUED) };
    }
    case Action.SHOW_MINE:
      return state.mine ? { ...state, error: null, run: state.mine, mine: null } : state;
    case ServerEvent.RUN_QUEUED: {
      if (sameRun(state, p.run_id)) {
        return { ...state, run: { ...state.run, status: RunStatus.QUEUED, position: p.position, ahead: p.ahead || null } };
      }
      // A new id is the answer to our submit (sent to us before anything else of that run); without a submit in
      // flight it is a position update of a run we watched once, which the page no longer shows.
      if (!state.pending) return state;
      const run = { ...newRun(p.run_id, RunStatus.QUEUED), own: true, position: p.position, ahead: p.ahead || null,
        name: state.sent && state.sent.workload ? String(state.sent.workload.name || "") : null };
      // taken: an older refusal no longer applies, and an older run of ours (ended) is no longer kept
      return { ...state, pending: false, sent: null, error: null, run, mine: null };
    }
    case ServerEvent.RUN_STARTED: {
      // Our run, or the run we watch, was made on run_queued or on watching: another id is a run we once watched.
      // A rejoin keeps what arrived so far; the replayed ticks are then skipped by `t`.
      if (!sameRun(state, p.run_id)) return state;
      const base = state.run.workload ? state.run : { ...newRun(p.run_id, RunStatus.RUNNING), own: state.run.own };
      const run = { ...base, status: base.status === RunStatus.FINISHED ? base.status : RunStatus.RUNNING,
        position: null, lanes: [...p.lanes], model: p.model || "",
        // the workload as written, its requests as the lanes run them (R3·1 ...) and each lane's every option, as
        // the engine resolved them (run_started): the page rebuilds neither
        workload: { ...p.workload, requests: p.requests || [] }, laneConfigs: p.lane_configs || {},
        promptTokens: p.prompt_tokens || {} };  // {request id: prompt tokens}: the lesson's fill-ins (lesson.js)
      const error = state.error && state.error.run_id !== p.run_id ? null : state.error;  // a new run started
      return { ...state, error, run };
    }
    case ServerEvent.TICK:
      return sameRun(state, p.run_id) ? { ...state, run: applyStep(state.run, p) } : state;
    case ServerEvent.RUN_PAUSED:  // its class's teacher paused it (its lanes wait), or it went on: `paused` says why
      return sameRun(state, p.run_id) ? { ...state, run: { ...state.run, paused: p.paused ? String(p.reason || "paused") : null } }
        : state;
    case ServerEvent.RUN_FINISHED: {
      if (!sameRun(state, p.run_id)) return state;
      const done = Object.fromEntries(state.run.lanes.map((lane) => [lane, true]));
      const cancelling = state.cancelling === p.run_id ? null : state.cancelling;  // it ended before the cancel
      return { ...state, cancelling, run: { ...state.run, status: RunStatus.FINISHED, done, serverMetrics: p.metrics } };
    }
    case ServerEvent.RUN_ERROR: {
      if (p.run_id && state.dropped.includes(p.run_id)) return dropped(state, p);
      const refusal = state.pending && (!p.run_id || p.code === "active_run");  // the answer to our pending submit
      const error = { message: String(p.message || "error"), field: p.field || null, run_id: p.run_id || null,
        code: p.code || null, refused: refusal && state.sent ? String(state.sent.workload.name || "your mix") : null };
      // A finished run stays finished (e.g. it ran but could not be stored); a live or queued one ends here.
      const ends = p.run_id && sameRun(state, p.run_id) && state.run.status !== RunStatus.FINISHED;
      const run = ends ? { ...state.run, status: RunStatus.ERROR } : state.run;
      return { ...state, pending: refusal ? false : state.pending, sent: refusal ? null : state.sent, error, run };
    }
    default:
      return state;
  }
}
