/**
 * A P/D lane's metrics (prefill and decode engines, engine/disaggregation.py), the JS twin of
 * engine/report/pd_metrics.py, the same arithmetic: each engine's records measured as a lane (counts summed), each
 * request read across its hand-off (prefill engine, the record's `transfers`, decode engine), its TTFT in five parts
 *
 *     TTFT = prefill queue + prefill + transfer + decode queue + first decode step      (`ttft_parts`, ms)
 *
 * and its inter-token gaps those between its decode steps (the first two tokens reach the client together). Also the
 * transfer marks the canvas draws (`pdTransfers`). DOM-free; knows nothing of how the engines are scheduled.
 */
import { SlotState } from "./catalog.js";
import { FLEET_METRICS } from "./fleetmetrics.js";
import { sloFigures } from "./slo.js";
import { mean, percentile } from "./stats.js";

export const PD_PARTS = Object.freeze(["prefill_queue", "prefill", "transfer", "decode_queue", "first_decode"]);
const SUMMED = ["tokens", "padding_slot_steps", "idle_slot_steps", "prefill_slot_steps", "preemptions", "swaps",
  "prompt_tokens_computed", "prompt_tokens_cached"];
const round3 = (v) => Math.round(v * 1000) / 1000;
const has = (v) => v !== null && v !== undefined;

/** Whether a lane's records are a P/D lane's (each record names its engines' roles). */
export function isPd(records) {
  return Boolean(records.length && records[0].roles);
}

/** Every hand-off of a P/D lane, in record order: the records' `transfers`, each with its lane step (1-based). */
export function pdTransfers(records) {
  return records.flatMap((r, k) => (r.transfers || []).map((t) => ({ ...t, step: k + 1 })));
}

/** engine/report/pd_metrics.py `walk`: what one engine's [lane step, record] pairs say of request `rid`. */
function walk(lane, rid) {
  const w = { admit_ms: null, admit_step: null, tokens: [], text: "", ends: [], cell_steps: [], stop: null,
    first_end: null, first_step: null, finished: null, finish_ms: null, returned: null, return_ms: null };
  for (const [k, rec] of lane) {
    const end = rec.start_ms + rec.ms;
    if (rec.admitted.includes(rid) && w.admit_ms === null) [w.admit_ms, w.admit_step] = [rec.start_ms, k];
    for (const cell of rec.slots) {
      if (cell.request !== rid || !has(cell.token_id)) continue;
      const many = Boolean(cell.tokens && cell.tokens.length);
      w.tokens.push(...(many ? cell.tokens : [cell.token_id]));
      if ((many || cell.stop !== "eos") && cell.token) w.text += cell.token;
      w.stop = cell.stop || w.stop;
      w.ends.push(end);
      w.cell_steps.push(k);
      if (w.first_end === null) [w.first_end, w.first_step] = [end, k];
    }
    if (rec.finished.includes(rid)) [w.finished, w.finish_ms] = [k, end];
    if (rec.returned.includes(rid) && w.returned === null) [w.returned, w.return_ms] = [k, end];
  }
  return w;
}

/** One request's figures across its hand-off (engine/report/pd_metrics.py `request_figures`). */
function requestFigures(spec, records, lanes, prefill, decode, transfer, timed) {
  const id = String(spec.id);
  const last = records[records.length - 1];
  const arrival0 = spec.arrival || 0;
  const arrivalMs = timed ? (spec.arrival_ms ?? 0)
    : (arrival0 < records.length ? records[arrival0].start_ms : last.start_ms + last.ms);
  let arrival = arrival0;
  if (timed) {
    const k = records.findIndex((r) => r.start_ms >= arrivalMs);
    arrival = k < 0 ? records.length : k;
  }
  const q = { id, arrival, arrival_ms: arrivalMs, first_token_step: null, finish_step: null, return_step: null,
    admit_step: null, token_ids: [], text: "", stop: null, preemptions: 0, prefill_engine: prefill,
    decode_engine: transfer ? transfer.decode : null, transfer: null, ttft_parts: null, gaps: [] };
  const p = walk(lanes[prefill], id);
  const d = has(decode) ? walk(lanes[decode], id) : null;
  q.token_ids = [...p.tokens, ...(d ? d.tokens : [])];
  q.text = p.text + (d ? d.text : "");
  q.admit_step = p.admit_step;
  q.stop = (d || p).stop;
  const done = d !== null && d.returned !== null ? d : d === null ? p : null;
  q.tokens = q.token_ids.length;
  if (p.first_end === null || done === null) {  // not yet returned
    return Object.assign(q, { ttft_steps: null, latency_steps: null, ttft_ms: null, tpot_ms: null, latency_ms: null,
      queue_ms: null });
  }
  const [firstMs, firstStep] = d !== null ? [d.ends[0], d.cell_steps[0]] : [p.first_end, p.first_step];
  Object.assign(q, { first_token_step: firstStep, finish_step: done.finished, return_step: done.returned,
    ttft_steps: firstStep - arrival, latency_steps: done.returned - arrival, ttft_ms: firstMs - arrivalMs,
    queue_ms: p.admit_ms - arrivalMs, latency_ms: done.return_ms - arrivalMs });
  q.tpot_ms = q.tokens > 1 ? (done.finish_ms - firstMs) / (q.tokens - 1) : null;
  q.gaps = d !== null ? d.ends.slice(1).map((b, i) => b - d.ends[i]) : [];
  const parts = { prefill_queue: p.admit_ms - arrivalMs, prefill: p.first_end - p.admit_ms, transfer: 0,
    decode_queue: 0, first_decode: 0 };
  if (transfer) {
    q.transfer = { blocks: transfer.blocks, bytes: transfer.bytes, ms: transfer.ms, through: transfer.through };
    const ready = transfer.start_ms + transfer.ms;
    Object.assign(parts, { transfer: transfer.ms, decode_queue: d.admit_ms - ready, first_decode: d.ends[0] - d.admit_ms });
  }
  q.ttft_parts = Object.fromEntries(PD_PARTS.map((k) => [k, round3(parts[k])]));
  return q;
}

/**
 * A P/D lane's metrics: engine/report/pd_metrics.py's, the same keys and values. `laneMetrics` (core/metrics.js's,
 * passed in as Python passes lane_metrics) measures each engine over its own requests.
 */
export function pdMetrics(records, workload, laneMetrics) {
  const roles = records[0].roles;
  const P = roles.filter((r) => r === "prefill").length;
  const lanes = roles.map((_, i) => records.map((r, k) => [k + 1, r.replicas[i]]).filter(([, rec]) => has(rec)));
  const routes = new Map(records.flatMap((r) => r.routes || []).map((route) => [route.request, route]));
  const transfers = new Map(records.flatMap((r) => r.transfers || []).map((t) => [t.request, t]));
  const engineOf = new Map([...routes].map(([id, route]) => [id, route.replica]));
  const decoderOf = new Map([...transfers].map(([id, t]) => [id, P + t.decode]));
  const parts = lanes.map((lane, i) => {
    const owner = i < P ? engineOf : decoderOf;
    const mine = workload.requests.filter((s) => owner.get(String(s.id)) === i);
    return lane.length ? laneMetrics(lane.map(([, rec]) => rec), { ...workload, requests: mine }) : null;
  });
  const timed = workload.requests.some((s) => has(s.arrival_ms));
  const per = workload.requests.filter((s) => engineOf.has(String(s.id))).map((s) => requestFigures(s, records, lanes,
    engineOf.get(String(s.id)), decoderOf.get(String(s.id)), transfers.get(String(s.id)), timed));
  const done = parts.filter(Boolean);
  const out = { steps: records.length };
  for (const k of SUMMED) out[k] = done.reduce((n, p) => n + p[k], 0);
  const cells = lanes.flatMap((lane) => lane.flatMap(([, rec]) => rec.slots));
  const wallS = done.length ? Math.max(...done.map((p) => p.wall_s)) : 0;
  const returned = per.filter((q) => q.return_step !== null).length;
  const stat = (key) => per.map((q) => q[key]).filter(has);
  Object.assign(out, {
    tokens_per_step: records.length ? out.tokens / records.length : 0,
    slot_use: cells.length ? cells.filter((c) => has(c.token_id)).length / cells.length : 0,
    mean_ttft_steps: mean(stat("ttft_steps")), mean_latency_steps: mean(stat("latency_steps")),
    p50_latency_steps: percentile(stat("latency_steps"), 50), p95_latency_steps: percentile(stat("latency_steps"), 95),
    wall_s: wallS, tokens_per_s: wallS > 0 ? out.tokens / wallS : null, requests_per_s: wallS > 0 ? returned / wallS : null,
    ...sloFigures(per, wallS, workload.slo),
    spec_acceptance_rate: null,
    tokens_per_decode_cell: cells.some((c) => c.state === SlotState.DECODE) ? 1 : null,
  });
  const itl = per.filter((q) => q.return_step !== null).flatMap((q) => q.gaps);
  for (const [key, values] of [["ttft", stat("ttft_ms")], ["tpot", stat("tpot_ms")], ["itl", itl],
    ["latency", stat("latency_ms")], ["queue", stat("queue_ms")]]) {
    out[`mean_${key}_ms`] = mean(values);
    for (const q of [50, 95, 99]) out[`p${q}_${key}_ms`] = percentile(values, q);
  }
  const seen = out.prompt_tokens_computed + out.prompt_tokens_cached;
  out.prefix_cache_hit_rate = seen ? out.prompt_tokens_cached / seen : null;
  const spreads = done.map((p) => p.step_time_spread).filter(has);
  out.step_time_spread = spreads.length ? Math.max(...spreads) : null;
  out.token_utilization = mean(done.map((p) => p.token_utilization).filter(has));
  for (const key of FLEET_METRICS) out[key] = null;
  out.simulated = done.every((p) => p.simulated);
  out.requests = Object.fromEntries(per.map((q) => [q.id, q]));
  if (records.length && records[0].placement) out.placement = records[0].placement;  // where it ran (placement.py)
  const moved = [...transfers.values()];
  const blocks = moved.reduce((n, t) => n + t.blocks, 0);
  const ms = moved.reduce((n, t) => n + t.ms, 0);
  const withParts = per.filter((q) => q.ttft_parts);
  out.pd = { prefill: P, decode: roles.length - P, transfers: moved.length, blocks,
    bytes: moved.reduce((n, t) => n + t.bytes, 0), ms: round3(ms), ms_per_block: blocks ? ms / blocks : null,
    through: [...new Set(moved.map((t) => t.through))].sort(),
    ...Object.fromEntries(PD_PARTS.map((part) => [`mean_${part}_ms`, mean(withParts.map((q) => q.ttft_parts[part]))])),
    engines: lanes.map((lane, i) => ({ name: lane.length ? lane[0][1].lane : null, role: roles[i],
      ...(parts[i] ? { steps: parts[i].steps, tokens: parts[i].tokens, wall_s: parts[i].wall_s } : {}) })) };
  return out;
}

/** A hand-off as the tooltip says it: "L1: 30 blocks (22.1 MB) from prefill engine 1, copied in 4.50 ms (simulated)". */
export function transferLine(t) {
  const mb = (t.bytes / 1e6).toFixed(1);
  const through = t.through === "simulated" ? "simulated: the cost model's time, nothing copied" : `through ${t.through}`;
  return `${t.request}: ${t.blocks} KV blocks (${mb} MB) from prefill engine ${t.prefill + 1}, copied in ${t.ms.toFixed(2)} ms (${through})`;
}
