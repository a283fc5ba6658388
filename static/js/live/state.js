/**
 * The Live view's state: one plain object, changed only by `applyLiveEvent`, a pure function that folds a
 * queued socket event in and returns a new object. It holds the live lane's recent step records (by step
 * number, the last minute and a bit of the lane clock), a summary per recent request (as the server sends
 * them), the model's status and the anchor of the lane clock: the lane time an event carried and when it
 * arrived on the page's clock (`performance.now()`), from which `laneNow` extrapolates. On a web process of a
 * scale-out deployment it shows one engine worker's lane (`lane.worker`) and drops the steps of the others. It knows the
 * live_snapshot / live_step payloads (app/protocol.py) and nothing of the canvas or the DOM.
 */
import { ConnectionEvent, ServerEvent } from "../core/vocab.js";

export const WINDOW_MS = 30_000;         // the canvas shows the last 30 s of the lane clock
export const FIGURE_MS = 60_000;         // the figures look back one minute
const KEEP_MS = FIGURE_MS + 5_000;       // older steps are dropped
const KEEP_REQUESTS = 200;               // as many summaries as the server keeps
const RESTARTED_S = 2;                   // a lane that opened this much later than ours is a new lane (server restart)

/** A request's phase, as its summary says (app/live/gateway.py). */
export const LiveStatus = Object.freeze({ WAITING: "waiting", RUNNING: "running", FINISHED: "finished" });
const RANK = { [LiveStatus.WAITING]: 0, [LiveStatus.RUNNING]: 1, [LiveStatus.FINISHED]: 2 };

export function createLiveState() {
  return {
    connected: false,
    model: { ready: false, progress: 0, message: "connecting to the server", error: null, model: "", device: "" },
    lane: null,      // {ready, model, slots, traits, options, startedAt} from the last snapshot
    clock: null,     // {laneMs, at}: the lane clock read `laneMs` when the page's clock read `at`
    records: [],     // step records, oldest first, no step twice
    requests: [],    // request summaries, in arrival order
    error: null,     // why the server cannot show live traffic (run_error), or null
  };
}

/** The lane clock now (ms), extrapolated on the page's clock from the last anchor; null before the lane opened. */
export function laneNow(state, perfNow) {
  return state.clock ? state.clock.laneMs + (perfNow - state.clock.at) : null;
}

const endOf = (r) => r.start_ms + r.ms;

/** The clock moved forward to `laneMs` seen at `at`: never backwards (both are lower bounds of the true time). */
function anchor(state, laneMs, at) {
  const ahead = laneNow(state, at);
  return { laneMs: ahead === null ? laneMs : Math.max(ahead, laneMs), at };
}

/** `records` with the new ones merged in by step (a step already held is dropped), older than KEEP_MS trimmed. */
function mergeRecords(records, incoming) {
  const last = records.length ? records[records.length - 1].step : -Infinity;
  const fresh = incoming.filter((r) => r.step > last);
  const older = incoming.filter((r) => r.step <= last && !records.some((have) => have.step === r.step));
  let out = fresh.length || older.length ? [...records, ...older, ...fresh] : records;
  if (older.length) out.sort((a, b) => a.step - b.step);
  if (!out.length) return out;
  const cutoff = endOf(out[out.length - 1]) - KEEP_MS;
  const first = out.findIndex((r) => endOf(r) >= cutoff);
  return first > 0 ? out.slice(first) : out;
}

/** Whether summary `q` is at least as far along as `old` (a snapshot and a step may carry the same request). */
const newer = (old, q) => RANK[q.status] > RANK[old.status]
  || (RANK[q.status] === RANK[old.status] && q.tokens >= old.tokens);

function mergeRequests(requests, incoming) {
  if (!incoming.length) return requests;
  const byId = new Map(requests.map((q) => [q.id, q]));
  for (const q of incoming) if (!byId.has(q.id) || newer(byId.get(q.id), q)) byId.set(q.id, q);
  const out = [...byId.values()].sort((a, b) => a.arrival_ms - b.arrival_ms);
  return out.length > KEEP_REQUESTS ? out.slice(out.length - KEEP_REQUESTS) : out;
}

function applySnapshot(state, s, at) {
  // worker/workers: a web process of a scale-out deployment shows one engine worker's lane of several (else null, [])
  const lane = { ready: Boolean(s.ready), model: s.model || "", slots: s.slots || 0, traits: s.traits || null,
    options: s.options || null, startedAt: s.started_at, worker: s.worker || null, workers: s.workers || [] };
  if (!lane.ready) return { ...state, lane, error: null };
  const restarted = state.lane && state.lane.ready && (Math.abs(lane.startedAt - state.lane.startedAt) > RESTARTED_S
    || lane.worker !== state.lane.worker);
  const base = restarted ? { ...state, records: [], requests: [], clock: null } : state;
  return { ...base, lane, error: null, clock: anchor(base, s.now_ms, at),
    records: mergeRecords(base.records, s.records || []), requests: mergeRequests(base.requests, s.requests || []) };
}

function applyStep(state, { record, requests, worker }, at) {
  if (worker && state.lane && state.lane.worker && worker !== state.lane.worker) return state;  // another worker's lane
  const lane = state.lane || { ready: true, model: state.model.model, slots: record.slots.length, traits: null,
    options: null, startedAt: null, worker: worker || null, workers: [] };
  return { ...state, lane, clock: anchor(state, endOf(record), at), records: mergeRecords(state.records, [record]),
    requests: mergeRequests(state.requests, requests || []) };
}

/** Fold one queued event ({type, payload, at}) in; returns a new state, changes neither argument. */
export function applyLiveEvent(state, { type, payload, at }) {
  switch (type) {
    case ConnectionEvent.CONNECTED: return { ...state, connected: true };
    case ConnectionEvent.DISCONNECTED: return { ...state, connected: false };
    case ServerEvent.MODEL_STATUS: return { ...state, model: { ...state.model, ...payload } };
    case ServerEvent.RUN_ERROR: return { ...state, error: String((payload && payload.message) || "error") };
    case ServerEvent.LIVE_SNAPSHOT: return applySnapshot(state, payload || {}, at);
    case ServerEvent.LIVE_STEP: return payload && payload.record ? applyStep(state, payload, at) : state;
    default: return state;
  }
}

/** Whether the page should (again) ask to watch the lane: the model is ready but the lane we saw was not open yet. */
export const needsWatch = (state) => state.connected && state.model.ready && Boolean(state.lane) && !state.lane.ready;
