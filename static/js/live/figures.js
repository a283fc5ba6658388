/**
 * The Live view's running figures, computed from the state alone at a lane time `now`: requests running and
 * waiting (their summaries' status), tokens/s (tokens the steps of the last minute wrote, over 60 s), KV in
 * use (the latest step's), and TTFT, TPOT and queue time p50/p95 over the requests that finished in the last
 * minute, with metrics.js's nearest-rank percentile. A request's times are metrics.js's requestTimes (the lane
 * metrics' own definition) over its summary's moments. Pure functions.
 */
import { percentile, requestTimes } from "../core/metrics.js";
import { FIGURE_MS, LiveStatus } from "./state.js";
import { StopReason } from "../core/vocab.js";

/**
 * {queue_ms, ttft_ms, tpot_ms, latency_ms} of one request summary (null where it has no such time yet): metrics.js's
 * requestTimes over the summary's moments (a live request returns as it finishes).
 */
export function summaryTimes(q) {
  return requestTimes(q.arrival_ms, q.admitted_ms, q.first_token_ms, q.finish_ms, q.finish_ms, q.tokens);
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
  const times = done.map(summaryTimes);
  const ttft = times.map((t) => t.ttft_ms).filter((v) => v !== null);
  const tpot = times.map((t) => t.tpot_ms).filter((v) => v !== null);
  const queue = times.map((t) => t.queue_ms).filter((v) => v !== null);
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
    queue_p50_ms: percentile(queue, 50),
    queue_p95_ms: percentile(queue, 95),
  };
}
