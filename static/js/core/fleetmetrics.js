/**
 * A fleet's metrics (a data-parallel lane: N replicas behind a router), the JS twin of engine/report/fleet_metrics.py:
 * each replica measured as a lane, the fleet's figures merged from them, the load imbalance and the prefix hit rates
 * available and achieved read from the records' routes. DOM-free.
 */
import { SlotState } from "./catalog.js";
import { sloFigures } from "./slo.js";
import { mean, percentile } from "./stats.js";

export const FLEET_METRICS = Object.freeze(["mean_load_imbalance", "max_load_imbalance", "prefix_hit_rate_available",
  "prefix_hit_rate_achieved"]);
const SUMMED = ["tokens", "padding_slot_steps", "idle_slot_steps", "prefill_slot_steps", "preemptions", "swaps",
  "prompt_tokens_computed", "prompt_tokens_cached"];
const GONE = [SlotState.IDLE, SlotState.PREEMPTED, SlotState.SWAPPED];

/** A replica's load after a step: requests holding a slot, and those waiting (engine/report/fleet_metrics.py). */
export function replicaLoad(record) {
  return record.slots.filter((c) => !GONE.includes(c.state)).length + record.waiting.length;
}

/**
 * Each replica's load over time, from a fleet's records: [[end ms, load] after each of its steps] per replica, the
 * metrics' `replicas[i].load` (engine/report/fleet_metrics.py), what the page's load band draws.
 */
export function fleetLoads(records) {
  const size = records.length ? records[0].replicas.length : 0;
  return Array.from({ length: size }, (_, i) => records.map((r) => r.replicas[i]).filter((x) => x)
    .map((r) => [Math.round((r.start_ms + r.ms) * 1000) / 1000, replicaLoad(r)]));
}

/** max - min of the replicas' loads after each fleet step (a replica that did not step keeps its last load). */
function imbalance(records) {
  const latest = records[0].replicas.map(() => 0);
  const spread = [];
  for (const r of records) {
    r.replicas.forEach((rec, i) => { if (rec) latest[i] = replicaLoad(rec); });
    spread.push(Math.max(...latest) - Math.min(...latest));
  }
  return { mean_load_imbalance: mean(spread), max_load_imbalance: spread.length ? Math.max(...spread) : null };
}

/**
 * A fleet's metrics (a data-parallel lane): engine/report/fleet_metrics.py's, the same arithmetic. Each replica's
 * records are lane records, measured by `laneMetrics` (core/metrics.js's, passed in as Python passes lane_metrics) over the requests the router sent it; the fleet's are those
 * merged (counts summed, per-request figures pooled, wall time the last replica's end) beside the load imbalance and
 * the prefix hit rates available and achieved, read from the records' routes.
 */
export function fleetMetrics(records, workload, laneMetrics) {
  const routes = records.flatMap((r) => r.routes || []);
  const size = records[0].replicas.length;
  const sent = new Map(routes.map((route) => [route.request, route]));
  const lanes = Array.from({ length: size }, (_, i) => records.map((r) => r.replicas[i]).filter((x) => x));
  const parts = lanes.map((lane, i) => (lane.length ? laneMetrics(lane, { ...workload,
    requests: workload.requests.filter((s) => sent.get(String(s.id))?.replica === i) }) : null));
  const byId = new Map();
  parts.forEach((part, i) => {
    for (const [id, q] of Object.entries(part ? part.requests : {})) byId.set(id, { ...q, replica: i, route: sent.get(id).branch });
  });
  const per = workload.requests.map((s) => String(s.id)).filter((id) => byId.has(id)).map((id) => byId.get(id));
  const done = parts.filter((p) => p);
  const out = { steps: records.length };
  for (const k of SUMMED) out[k] = done.reduce((n, p) => n + p[k], 0);
  const cells = lanes.flatMap((lane) => lane.flatMap((r) => r.slots));
  const written = cells.filter((c) => c.token_id !== null && c.token_id !== undefined).length;
  const decode = cells.filter((c) => c.state === SlotState.DECODE);
  const proposed = cells.reduce((n, c) => n + (c.proposed || 0), 0);
  const accepted = cells.reduce((n, c) => n + (c.accepted || 0), 0);
  const wallS = done.length ? Math.max(...done.map((p) => p.wall_s)) : 0;
  const returned = per.filter((q) => q.return_step !== null).length;
  const stat = (key) => per.map((q) => q[key]).filter((v) => v !== null && v !== undefined);
  Object.assign(out, {
    tokens_per_step: records.length ? out.tokens / records.length : 0,
    slot_use: cells.length ? written / cells.length : 0,
    mean_ttft_steps: mean(stat("ttft_steps")), mean_latency_steps: mean(stat("latency_steps")),
    p50_latency_steps: percentile(stat("latency_steps"), 50), p95_latency_steps: percentile(stat("latency_steps"), 95),
    wall_s: wallS, tokens_per_s: wallS > 0 ? out.tokens / wallS : null, requests_per_s: wallS > 0 ? returned / wallS : null,
    ...sloFigures(per, wallS, workload.slo),  // over the fleet's requests, on its wall clock
    spec_acceptance_rate: proposed ? accepted / proposed : null,
    tokens_per_decode_cell: decode.length ? decode.reduce((n, c) => n + (c.tokens || [1]).length, 0) / decode.length : null,
  });
  const itl = [];  // every gap between two tokens of one returned request, on its replica's clock
  const ends = lanes.map((lane) => new Map(lane.map((r) => [r.step, r.start_ms + r.ms])));
  for (const q of per) {
    if (q.return_step === null) continue;
    const end = ends[q.replica];
    for (let i = 1; i < q.token_steps.length; i += 1) itl.push(end.get(q.token_steps[i]) - end.get(q.token_steps[i - 1]));
  }
  for (const [key, values] of [["ttft", stat("ttft_ms")], ["tpot", stat("tpot_ms")], ["itl", itl], ["latency", stat("latency_ms")],
    ["queue", stat("queue_ms")]]) {
    out[`mean_${key}_ms`] = mean(values);
    for (const q of [50, 95, 99]) out[`p${q}_${key}_ms`] = percentile(values, q);
  }
  const seen = out.prompt_tokens_computed + out.prompt_tokens_cached;
  out.prefix_cache_hit_rate = seen ? out.prompt_tokens_cached / seen : null;
  const spreads = done.map((p) => p.step_time_spread).filter((v) => v !== null);
  out.step_time_spread = spreads.length ? Math.max(...spreads) : null;  // the noisiest replica's
  out.token_utilization = mean(done.map((p) => p.token_utilization).filter((v) => v !== null));
  Object.assign(out, imbalance(records));
  const prompt = routes.reduce((n, route) => n + route.prompt_tokens, 0);
  out.prefix_hit_rate_available = prompt ? routes.reduce((n, route) => n + Math.max(...route.matched), 0) / prompt : null;
  out.prefix_hit_rate_achieved = prompt ? routes.reduce((n, route) => n + route.matched[route.replica], 0) / prompt : null;
  out.simulated = done.every((p) => p.simulated);
  out.requests = Object.fromEntries(per.map((q) => [q.id, q]));
  const loads = fleetLoads(records);
  out.replicas = lanes.map((lane, i) => ({ name: lane.length ? lane[0].lane : null,
    requests: per.filter((q) => q.replica === i).map((q) => q.id),
    ...(parts[i] ? Object.fromEntries(["steps", "tokens", "wall_s", "prefix_cache_hit_rate", "mean_ttft_ms", "preemptions"]
      .map((k) => [k, parts[i][k]])) : {}),
    load: loads[i] }));
  return out;
}
