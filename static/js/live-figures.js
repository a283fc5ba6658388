/**
 * The Live view's running figures, computed from the state alone at a lane time `now`: requests running and
 * waiting (their summaries' status), tokens/s (tokens the steps of the last minute wrote, over 60 s), KV in
 * use (the latest step's), and TTFT and TPOT p50/p95 over the requests that finished in the last minute, with
 * metrics.js's nearest-rank percentile. A request's TTFT is its first token's time less its arrival; its TPOT
 * the time from its first token to its last over the tokens after the first. Pure functions.
 */
import { percentile } from "./metrics.js";
import { FIGURE_MS, LiveStatus } from "./live-state.js";
import { StopReason } from "./vocab.js";

/** {ttft_ms, tpot_ms} of one request summary (null where it has no such time yet). */
export function requestTimes(q) {
  const first = q.first_token_ms;
  const ttft = first !== null && first !== undefined ? first - q.arrival_ms : null;
  const tpot = ttft !== null && q.finish_ms !== null && q.finish_ms !== undefined && q.tokens > 1
    ? (q.finish_ms - first) / (q.tokens - 1) : null;
  return { ttft_ms: ttft, tpot_ms: tpot };
}

/** Every figure the panel shows, at lane time `now` (ms). */
export function liveFigures(state, now) {
  const from = (now ?? 0) - FIGURE_MS;
  let tokens = 0;
  for (const r of state.records) {
    if (r.start_ms + r.ms < from) continue;
    for (const cell of r.slots) if (cell.token_id !== null && cell.token_id !== undefined) tokens += cell.tokens ? cell.tokens.length : 1;
  }
  const last = state.records.length ? state.records[state.records.length - 1] : null;
  const done = state.requests.filter((q) => q.finish_ms !== null && q.finish_ms !== undefined && q.finish_ms >= from
    && q.stop !== StopReason.CANCELLED);
  const times = done.map(requestTimes);
  const ttft = times.map((t) => t.ttft_ms).filter((v) => v !== null);
  const tpot = times.map((t) => t.tpot_ms).filter((v) => v !== null);
  return {
    running: state.requests.filter((q) => q.status === LiveStatus.RUNNING).length,
    waiting: state.requests.filter((q) => q.status === LiveStatus.WAITING).length,
    tokens_last_minute: tokens,
    tokens_per_s: tokens / (FIGURE_MS / 1000),
    kv_used: last ? last.kv_used : null,
    kv_capacity: last ? last.kv_capacity : null,
    kv_pct: last && last.kv_capacity ? (100 * last.kv_used) / last.kv_capacity : null,
    finished_last_minute: done.length,
    ttft_p50_ms: percentile(ttft, 50),
    ttft_p95_ms: percentile(ttft, 95),
    tpot_p50_ms: percentile(tpot, 50),
    tpot_p95_ms: percentile(tpot, 95),
  };
}
