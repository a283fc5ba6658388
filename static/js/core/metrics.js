/**
 * Every metric the page shows, computed from the step records alone (plus each request's arrival),
 * with the same definitions and the same arithmetic order as engine/report/metrics.py's lane_metrics — so
 * the table cannot disagree with the canvas, and `mismatches` can check it against
 * `run_finished.metrics` number by number; tests/js/core/metrics.test.mjs holds it to tests/golden's answers without a
 * browser. Times are on the lane's clock (`start_ms`, `ms`). Which keys exist is the metric table's (catalog.js).
 */
import { METRICS, SlotState, StopReason } from "./catalog.js";
import { configOf } from "./laneconfig.js";
import { FLEET_METRICS, fleetMetrics } from "./fleetmetrics.js";
import { isPd, pdMetrics } from "./pdmetrics.js";
import { tokenUtilization } from "./memmap.js";
import { sloFigures } from "./slo.js";
import { mean, percentile } from "./stats.js";

export { percentile };  // noise.js and live/figures.js read it here

/**
 * The text a cell adds to its request's response: its token, except an EOS token, which writes nothing (a
 * speculative cell that wrote several tokens carries their text without a closing EOS).
 */
export function writtenText(cell) {
  return cell.token && (cell.tokens || cell.stop !== StopReason.EOS) ? cell.token : "";
}

/** The token ids a cell wrote: several for a speculative cell that kept proposals, else its one token. */
export function cellTokens(cell) {
  return cell.tokens || [cell.token_id];
}

/**
 * {starts, ends}: each step's start and end on the lane clock, in ms (engine/report/metrics.py lane_times).
 * Records stored before lanes had clocks carry no `start_ms`: their steps follow each other without gaps.
 */
export function laneTimes(records) {
  const starts = [];
  const ends = [];
  let t = 0;
  for (const r of records) {
    const start = r.start_ms ?? t;
    t = start + r.ms;
    starts.push(start);
    ends.push(t);
  }
  return { starts, ends };
}

/** Index of the first value >= x in a sorted array (Python's bisect_left). */
export function bisectLeft(sorted, x) {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Whether a workload's arrivals are in milliseconds (`arrival_ms`) rather than steps. */
export function isTimed(workload) {
  return workload.requests.some((q) => q.arrival_ms !== undefined && q.arrival_ms !== null);
}

/** Where each request arrives on a lane: {arrival (steps started before it), arrival_ms}. */
export function arrivalOf(spec, starts, end) {
  if (spec.arrival_ms !== undefined && spec.arrival_ms !== null) {
    return { arrival: bisectLeft(starts, spec.arrival_ms), arrival_ms: spec.arrival_ms };
  }
  const arrival = spec.arrival || 0;
  return { arrival, arrival_ms: arrival < starts.length ? starts[arrival] : end[end.length - 1] };
}

function requestFacts(records, workload, starts, end) {
  const per = new Map();
  for (const spec of workload.requests) {
    per.set(String(spec.id), { id: String(spec.id), ...arrivalOf(spec, starts, end), first_token_step: null,
      finish_step: null, return_step: null, admit_step: null, token_ids: [], token_steps: [], text: "", stop: null,
      preemptions: 0 });
  }
  for (const r of records) {
    for (const id of r.admitted || []) {  // its first admission: a preempted request's later ones are not queueing
      const q = per.get(id);
      if (q && q.admit_step === null) q.admit_step = r.step;
    }
    for (const cell of r.slots) {
      if (cell.token_id === null || cell.token_id === undefined) continue;
      const q = per.get(cell.request);
      if (!q) continue;
      if (q.first_token_step === null) q.first_token_step = r.step;
      q.token_ids.push(...cellTokens(cell));
      q.token_steps.push(r.step);  // one entry per cell: tokens written together have no gap between them
      if (cell.stop) q.stop = cell.stop;
      q.text += writtenText(cell);
    }
    for (const id of r.finished) if (per.has(id)) per.get(id).finish_step = r.step;
    for (const id of r.returned) if (per.has(id)) per.get(id).return_step = r.step;
    for (const { id } of evictions(r)) if (per.has(id)) per.get(id).preemptions += 1;
  }
  return per;
}

/**
 * The requests a step evicted to free KV memory, [{id, swapped}] (engine/report/metrics.py evictions): its preempted
 * cells (blocks freed, recomputed later) and its swapped cells (blocks copied to the host pool). Both are evictions:
 * `preemptions` counts every one, `swaps` the swap-outs; the caption and the narration read them here.
 */
export function evictions(record) {
  return record.slots.filter((c) => c.state === SlotState.PREEMPTED || c.state === SlotState.SWAPPED)
    .map((c) => ({ id: c.request, swapped: c.state === SlotState.SWAPPED }));
}

/**
 * {computed, cached}: prompt tokens the lane's prefill cells computed, and took from the prefix cache
 * (engine/report/metrics.py prompt_tokens). A preempted request starts again from 0 and is counted again.
 */
export function promptTokens(records) {
  const progress = new Map();
  let computed = 0;
  let cached = 0;
  for (const r of records) {
    for (const cell of r.slots) {
      if (cell.state === SlotState.PREEMPTED) progress.set(cell.request, 0);
      else if (cell.state === SlotState.PREFILL && cell.prefill) {
        const hit = cell.cached || 0;
        computed += cell.prefill[0] - (progress.get(cell.request) || 0) - hit;
        cached += hit;
        progress.set(cell.request, cell.prefill[0]);
      }
    }
  }
  return { computed, cached };
}

/**
 * A step's shape (engine/report/metrics.py step_shape): its forward kind, the rows it computed and the token positions
 * they held ("split|4|67"); null for a step that computed nothing. `progress` (request -> prompt tokens read) is
 * updated as promptTokens does, so a prefill chunk counts only the tokens it added.
 */
export function stepShape(record, progress) {
  if ((record.forward || "none") === "none") return null;
  let rows = 0;
  let tokens = 0;
  for (const cell of record.slots) {
    if (cell.state === SlotState.PREEMPTED) progress.set(cell.request, 0);
    else if (cell.state === SlotState.PREFILL && cell.prefill) {
      rows += 1;
      tokens += cell.prefill[0] - (progress.get(cell.request) || 0) - (cell.cached || 0);
      progress.set(cell.request, cell.prefill[0]);
    } else if (cell.state === SlotState.DECODE || cell.state === SlotState.PADDING) {
      rows += 1;
      tokens += 1 + (cell.proposed || 0);
    }
  }
  return `${record.forward}|${rows}|${tokens}`;
}

/** The records that computed something, grouped by their shape (stepShape), in run order: shape -> records. */
export function stepsByShape(records) {
  const progress = new Map();
  const byShape = new Map();
  for (const r of records) {
    const shape = stepShape(r, progress);
    if (shape === null) continue;
    if (!byShape.has(shape)) byShape.set(shape, []);
    byShape.get(shape).push(r);
  }
  return byShape;
}

/**
 * How much steps of the same shape varied in time (engine/report/metrics.py step_time_spread): each such step's distance
 * from its shape's median ms as a share of that median, the 90th percentile of those; null when no shape repeats.
 */
export function stepTimeSpread(records) {
  const deviations = [];
  for (const steps of stepsByShape(records).values()) {
    const times = steps.map((r) => r.ms);
    const middle = percentile(times, 50);
    if (times.length > 1 && middle > 0) for (const t of times) deviations.push(Math.abs(t - middle) / middle);
  }
  return percentile(deviations, 90);
}

/** A record's simulated flag: a top-level field, or (runs stored before it was one) in its `extra`. */
export function isSimulated(record) {
  return Boolean(record.simulated ?? (record.extra || {}).simulated);
}

/**
 * A request's times in ms from the moments of its life on the lane clock (null: not yet): queue time (arrival to
 * the start of the step that first admitted it), TTFT (to the end of the step that wrote its first token), TPOT
 * (first token to last over the tokens after the first), latency (to its return). engine/report/metrics.py's
 * request_times, the same arithmetic; the lane metrics and the Live view both read it.
 */
export function requestTimes(arrivalMs, admittedMs, firstTokenMs, finishMs, returnMs, tokens) {
  const since = (start, t) => (start === null || start === undefined || t === null || t === undefined ? null : t - start);
  return {
    queue_ms: since(arrivalMs, admittedMs),
    ttft_ms: since(arrivalMs, firstTokenMs),
    tpot_ms: tokens > 1 && since(firstTokenMs, finishMs) !== null ? since(firstTokenMs, finishMs) / (tokens - 1) : null,
    latency_ms: since(arrivalMs, returnMs),
  };
}

/** The KV block size of the lane these records are of: its pool's (the first record's kv_pool), else its own option,
 * else the workload's (engine/report/metrics.py). */
export function laneBlockSize(records, workload) {
  if (records.length && records[0].kv_pool) return records[0].kv_pool.block_size;
  const own = records.length ? configOf(workload, records[0].lane).options.kv_block_size : undefined;
  return own ?? workload.kv_block_size ?? 16;
}

/** The metrics of one lane: the same keys and values as engine/report/metrics.py's lane_metrics. */
export function laneMetrics(records, workload) {
  if (isPd(records)) return pdMetrics(records, workload, laneMetrics);  // its requests read across the hand-off
  if (records.length && records[0].replicas) return fleetMetrics(records, workload, laneMetrics);  // its replicas', merged
  const slots = records.length ? records[0].slots.length : 0;  // no records: no steps, so no slot use either
  const steps = records.length;
  const { starts, ends } = laneTimes(records);
  const end = [0, ...ends];  // end[s]: the lane clock when step s ended (end[0]: the lane's start)
  const simulated = Boolean(records.length) && isSimulated(records[0]);
  const per = requestFacts(records, workload, starts, end);
  const counts = Object.fromEntries(Object.values(SlotState).map((s) => [s, 0]));
  let writtenCells = 0;
  let decodeTokens = 0;
  let proposed = 0;
  let accepted = 0;
  let evicted = 0;
  let swaps = 0;
  for (const r of records) {
    for (const { swapped } of evictions(r)) {
      evicted += 1;
      if (swapped) swaps += 1;
    }
    for (const cell of r.slots) {
      counts[cell.state] += 1;
      if (cell.token_id === null || cell.token_id === undefined || !per.has(cell.request)) continue;
      writtenCells += 1;
      if (cell.state === SlotState.DECODE) decodeTokens += cellTokens(cell).length;
      proposed += cell.proposed || 0;
      accepted += cell.accepted || 0;
    }
  }
  const itl = [];  // every gap between two tokens of one request, in ms
  for (const q of per.values()) {
    const { arrival: a, first_token_step: first, finish_step: fin, return_step: ret } = q;
    q.tokens = q.token_ids.length;
    q.ttft_steps = first === null ? null : first - a;
    q.latency_steps = ret === null ? null : ret - a;
    const done = ret !== null;  // a request's token times count once it was returned
    Object.assign(q, requestTimes(q.arrival_ms, q.admit_step === null ? null : starts[q.admit_step - 1],
      done ? end[first] : null, done ? end[fin] : null, done ? end[ret] : null, q.tokens));
    if (done) for (let i = 1; i < q.token_steps.length; i += 1) itl.push(end[q.token_steps[i]] - end[q.token_steps[i - 1]]);
  }
  const all = [...per.values()];
  const stat = (key) => all.map((q) => q[key]).filter((v) => v !== null);
  const tokens = all.reduce((n, q) => n + q.tokens, 0);
  const wallS = end[end.length - 1] / 1000;
  const returned = all.filter((q) => q.return_step !== null).length;
  const out = {
    steps,
    tokens,
    tokens_per_step: steps ? tokens / steps : 0,
    slot_use: steps ? writtenCells / (slots * steps) : 0,
    padding_slot_steps: counts[SlotState.PADDING],
    idle_slot_steps: counts[SlotState.IDLE],
    prefill_slot_steps: counts[SlotState.PREFILL],
    preemptions: evicted,  // every eviction, recomputed or swapped out
    swaps,  // of those, the swap-outs
    mean_ttft_steps: mean(stat("ttft_steps")),
    mean_latency_steps: mean(stat("latency_steps")),
    p50_latency_steps: percentile(stat("latency_steps"), 50),
    p95_latency_steps: percentile(stat("latency_steps"), 95),
    wall_s: wallS,
    tokens_per_s: wallS > 0 ? tokens / wallS : null,
    requests_per_s: wallS > 0 ? returned / wallS : null,
    ...sloFigures(all, wallS, workload.slo),  // slo_met, request_goodput, slo_attainment (slo.js)
    spec_acceptance_rate: proposed ? accepted / proposed : null,
    tokens_per_decode_cell: counts[SlotState.DECODE] ? decodeTokens / counts[SlotState.DECODE] : null,
  };
  for (const [key, values] of [["ttft", stat("ttft_ms")], ["tpot", stat("tpot_ms")], ["itl", itl], ["latency", stat("latency_ms")],
    ["queue", stat("queue_ms")]]) {
    out[`mean_${key}_ms`] = mean(values);
    for (const q of [50, 95, 99]) out[`p${q}_${key}_ms`] = percentile(values, q);
  }
  const prompt = promptTokens(records);
  out.prompt_tokens_computed = prompt.computed;
  out.prompt_tokens_cached = prompt.cached;
  out.prefix_cache_hit_rate = prompt.computed + prompt.cached ? prompt.cached / (prompt.computed + prompt.cached) : null;
  out.step_time_spread = stepTimeSpread(records);
  out.token_utilization = tokenUtilization(records, laneBlockSize(records, workload));
  for (const key of FLEET_METRICS) out[key] = null;  // a fleet's numbers: none for a lane of one engine
  out.simulated = simulated;
  out.requests = Object.fromEntries(all.map((q) => [q.id, q]));
  return out;
}

/** Every number of a lane's metrics (not its requests), the metric table's order: what is checked against the
 * server and exported as CSV. */
export const METRIC_KEYS = Object.freeze(METRICS.map((m) => m.key));

function close(a, b) {
  if (a === null || a === undefined || b === null || b === undefined) return (a ?? null) === (b ?? null);
  return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
}

// A metric whose definition changed -> the metric that came with the change: a run stored before it is compared
// without the old figure (`preemptions` counted recomputed evictions only until `swaps` stood beside it).
const REDEFINED = Object.freeze({ preemptions: "swaps" });

/**
 * The keys where the page's metrics differ from the server's (empty: they agree). Every METRIC_KEYS key the
 * server sent is compared; a run stored before a key existed (or before it was REDEFINED) is replayed without it.
 */
export function mismatches(mine, server) {
  const bad = [];
  for (const [lane, m] of Object.entries(mine)) {
    const s = server && server[lane];
    if (!s) { bad.push(`${lane}: missing on the server`); continue; }
    const sent = (key) => key in s && (!REDEFINED[key] || REDEFINED[key] in s);
    for (const key of METRIC_KEYS) if (sent(key) && !close(m[key], s[key])) bad.push(`${lane}.${key}`);
  }
  return bad;
}
