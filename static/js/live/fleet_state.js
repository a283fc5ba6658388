/**
 * The fleet view's state: one plain object, changed only by `applyFleetPoll`, a pure function that folds one answer
 * of `GET /api/fleet` (app/live/fleet.py) in and returns a new object. Every replica's step records and request
 * summaries are moved from its own lane clock onto one clock, the wall clock in ms (a lane's time t happened at
 * `started_at` * 1000 + t), so the replicas' lanes line up; the clock is anchored on the poll's `at` (the fleet
 * script's wall clock when it read them) and extrapolated on the page's clock by `fleetNow`. A replica that stops
 * answering keeps the steps it had, marked down with the reason. It knows the /api/fleet payload, nothing of the
 * canvas or the DOM.
 */
export const POLL_MS = 1000;      // how often the page asks

export function createFleetState() {
  return {
    polls: 0,          // answers folded in
    failed: null,      // why the last poll got no answer (the fleet script itself is gone), or null
    clock: null,       // {wallMs, at}: the wall clock read `wallMs` when the page's clock read `at`
    replicas: [],      // per replica: {index, url, up, error, model, slots, options, offset, records, requests, metrics}
    router: null,      // {url, metrics_url, policy, up, error, samples}
  };
}

/** The shared clock now (wall ms), extrapolated on the page's clock from the last poll; null before the first. */
export function fleetNow(state, perfNow) {
  return state.clock ? state.clock.wallMs + (perfNow - state.clock.at) : null;
}

const shiftRecord = (r, off) => ({ ...r, start_ms: r.start_ms + off });
const TIMES = ["arrival_ms", "admitted_ms", "first_token_ms", "finish_ms"];
function shiftRequest(q, off) {
  const out = { ...q };
  for (const k of TIMES) if (q[k] !== null && q[k] !== undefined) out[k] = q[k] + off;
  return out;
}

/** One replica as the page holds it, from its part of a poll and what the page had of it (kept while it is down). */
function replicaOf(poll, before) {
  const live = poll.live;
  const base = { index: poll.index, url: poll.url, up: poll.up, error: poll.error, metrics: poll.metrics || null };
  if (!poll.up || !live || !live.ready) {
    const held = before || { model: "", slots: 0, options: null, offset: 0, records: [], requests: [] };
    const error = poll.up ? "its live lane is not ready (the model is loading)" : poll.error;
    return { ...held, ...base, up: poll.up && Boolean(live && live.ready), error, metrics: base.metrics || held.metrics };
  }
  const offset = live.started_at * 1000;   // lane time 0 on the wall clock
  return { ...base, model: live.model || "", slots: live.slots || 0, options: live.options || null, offset,
    records: (live.records || []).map((r) => shiftRecord(r, offset)),
    requests: (live.requests || []).map((q) => shiftRequest(q, offset)) };
}

/** Fold one /api/fleet answer (`payload`, arrived at page time `at`) in; a failed poll is `{failed: reason}`. */
export function applyFleetPoll(state, payload, at) {
  if (payload.failed) return { ...state, failed: payload.failed };
  const before = new Map(state.replicas.map((r) => [r.url, r]));
  const wallMs = payload.at * 1000;
  const ahead = fleetNow(state, at);
  return {
    polls: state.polls + 1,
    failed: null,
    clock: { wallMs: ahead === null ? wallMs : Math.max(ahead, wallMs), at },   // never backwards
    replicas: payload.replicas.map((r) => replicaOf(r, before.get(r.url))),
    router: payload.router,
  };
}
