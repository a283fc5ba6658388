/**
 * Every metric the page shows, computed from the step records alone (plus each request's arrival),
 * with the same definitions as engine/metrics.py — so the table cannot disagree with the canvas,
 * and `matchesServer` can check it against `run_finished.metrics` number by number.
 */
import { SlotState, StopReason } from "./vocab.js";

/** Nearest-rank percentile (q in 0..100); null when empty. */
export function percentile(values, q) {
  if (!values.length) return null;
  const ordered = [...values].sort((a, b) => a - b);
  const k = Math.max(0, Math.min(ordered.length - 1, Math.ceil((ordered.length * q) / 100) - 1));
  return ordered[k];
}

function mean(values) {
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
}

/** The text a cell adds to its request's response: its token, except an EOS token, which writes nothing. */
export function writtenText(cell) {
  return cell.token && cell.stop !== StopReason.EOS ? cell.token : "";
}

/** cum[s]: milliseconds spent in steps 1..s of one lane. */
export function cumulativeMs(records) {
  const cum = [0];
  for (const r of records) cum.push(cum[cum.length - 1] + r.ms);
  return cum;
}

function requestFacts(records, workload) {
  const per = new Map();
  for (const spec of workload.requests) {
    per.set(String(spec.id), { id: String(spec.id), arrival: spec.arrival || 0, first_token_step: null,
      finish_step: null, return_step: null, token_ids: [], text: "", stop: null, preemptions: 0 });
  }
  for (const r of records) {
    for (const cell of r.slots) {
      if (cell.token_id === null || cell.token_id === undefined) continue;
      const q = per.get(cell.request);
      if (!q) continue;
      if (q.first_token_step === null) q.first_token_step = r.step;
      q.token_ids.push(cell.token_id);
      if (cell.stop) q.stop = cell.stop;
      q.text += writtenText(cell);
    }
    for (const id of r.finished) if (per.has(id)) per.get(id).finish_step = r.step;
    for (const id of r.returned) if (per.has(id)) per.get(id).return_step = r.step;
    for (const id of r.preempted || []) if (per.has(id)) per.get(id).preemptions += 1;
  }
  return per;
}

/** The metrics of one lane: the same keys and values as engine/metrics.py's lane_metrics. */
export function laneMetrics(records, workload) {
  const slots = records.length ? records[0].slots.length : workload.slots || 4;
  const steps = records.length;
  const cum = cumulativeMs(records);
  const simulated = Boolean(records.length && records[0].extra && records[0].extra.simulated);
  const per = requestFacts(records, workload);
  const counts = Object.fromEntries(Object.values(SlotState).map((s) => [s, 0]));
  for (const r of records) for (const cell of r.slots) counts[cell.state] += 1;
  for (const q of per.values()) {
    const { arrival: a, first_token_step: first, finish_step: fin, return_step: ret } = q;
    q.tokens = q.token_ids.length;
    q.ttft_steps = first === null ? null : first - a;
    q.latency_steps = ret === null ? null : ret - a;
    const timed = !simulated && ret !== null;
    q.ttft_ms = timed ? cum[first] - cum[a] : null;
    q.latency_ms = timed ? cum[ret] - cum[a] : null;
    q.tpot_ms = timed && q.tokens > 1 ? (cum[fin] - cum[first]) / (q.tokens - 1) : null;
  }
  const all = [...per.values()];
  const stat = (key) => all.map((q) => q[key]).filter((v) => v !== null);
  const tokens = all.reduce((n, q) => n + q.tokens, 0);
  const wallS = cum[cum.length - 1] / 1000;
  return {
    steps,
    tokens,
    tokens_per_step: steps ? tokens / steps : 0,
    slot_use: steps ? tokens / (slots * steps) : 0,
    padding_slot_steps: counts[SlotState.PADDING],
    idle_slot_steps: counts[SlotState.IDLE],
    prefill_slot_steps: counts[SlotState.PREFILL],
    preemptions: counts[SlotState.PREEMPTED],
    mean_ttft_steps: mean(stat("ttft_steps")),
    mean_latency_steps: mean(stat("latency_steps")),
    p50_latency_steps: percentile(stat("latency_steps"), 50),
    p95_latency_steps: percentile(stat("latency_steps"), 95),
    wall_s: simulated ? null : wallS,
    tokens_per_s: !simulated && wallS > 0 ? tokens / wallS : null,
    mean_ttft_ms: mean(stat("ttft_ms")),
    p50_ttft_ms: percentile(stat("ttft_ms"), 50),
    p95_ttft_ms: percentile(stat("ttft_ms"), 95),
    mean_tpot_ms: mean(stat("tpot_ms")),
    p50_tpot_ms: percentile(stat("tpot_ms"), 50),
    p95_tpot_ms: percentile(stat("tpot_ms"), 95),
    mean_latency_ms: mean(stat("latency_ms")),
    p95_latency_ms: percentile(stat("latency_ms"), 95),
    simulated,
    requests: Object.fromEntries(all.map((q) => [q.id, q])),
  };
}

/** Every number of a lane's metrics (not its requests): what is checked against the server and exported as CSV. */
export const METRIC_KEYS = Object.freeze(["steps", "tokens", "tokens_per_step", "slot_use", "mean_ttft_steps",
  "mean_ttft_ms", "p50_ttft_ms", "p95_ttft_ms", "mean_tpot_ms", "p50_tpot_ms", "p95_tpot_ms", "mean_latency_steps",
  "p50_latency_steps", "p95_latency_steps", "mean_latency_ms", "p95_latency_ms", "wall_s", "tokens_per_s",
  "padding_slot_steps", "idle_slot_steps", "prefill_slot_steps", "preemptions"]);

function close(a, b) {
  if (a === null || a === undefined || b === null || b === undefined) return (a ?? null) === (b ?? null);
  return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
}

/** The keys where the page's metrics differ from the server's (empty: they agree). */
export function mismatches(mine, server) {
  const bad = [];
  for (const [lane, m] of Object.entries(mine)) {
    const s = server && server[lane];
    if (!s) { bad.push(`${lane}: missing on the server`); continue; }
    for (const key of METRIC_KEYS) if (key in s && !close(m[key], s[key])) bad.push(`${lane}.${key}`);
  }
  return bad;
}
