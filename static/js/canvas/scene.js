/**
 * From a run to what one frame shows: the lanes in page order (by policy, then as given) with their
 * configurations, derived timelines and metrics (memoized per records array), the x-axis domain
 * (which only grows while a run streams, so cells do not shrink every tick), each lane's step under
 * the playhead (and the gap it waits in, if any) with its metrics up to that step, and the scene the
 * renderer draws. Pure functions of their inputs, apart from the memo caches.
 */
import { laneTitle, orderLanes, resolvedConfig } from "../core/laneconfig.js";
import { isTimed, laneMetrics, mismatches } from "../core/metrics.js";
import { traitsOf } from "../core/policies.js";
import { fleetLoads } from "../core/fleetmetrics.js";
import { pdLanes } from "./pdlanes.js";
import { sloVerdicts, withSlo } from "../core/slo.js";
import { estimateSteps, gapAt, laneTimeline, perRecords, stepAt, stepCount } from "../core/timeline.js";
import { RunStatus, SlotState } from "../core/vocab.js";
import { count } from "../core/words.js";
import { hasSplit } from "../core/tpsplit.js";

const metricsOf = perRecords(laneMetrics);
const partial = new WeakMap();  // records array -> Map(step -> metrics of records[0..step))

/** A lane's metrics from its first `step` records (what happened up to the playhead); all of them: the run's. */
export function metricsUpTo(lane, step, workload, whole) {
  if (step >= lane.records.length) return whole;
  let memo = partial.get(lane.records);
  if (!memo || memo.workload !== workload) {
    memo = { workload, byStep: new Map() };
    partial.set(lane.records, memo);
  }
  if (!memo.byStep.has(step)) memo.byStep.set(step, laneMetrics(lane.records.slice(0, step), workload));
  return memo.byStep.get(step);
}

let last = { run: undefined, value: null };

/**
 * {run, lanes: [{name, policy, config, title, records, done, timeline, kvBudget, mayPreempt}], metrics: {lane: m},
 * check: "" | "ok" | "a, b", timed, marks}; once per run object. `marks`: whether lanes show request arrivals; `kvBudget`:
 * a KV budget binds the lane; `mayPreempt`: and its policy's traits say it preempts (continuous).
 */
export function deriveRun(run) {
  if (run !== last.run) last = { run, value: derive(run) };
  return last.value;
}

function derive(run) {
  if (!run || !run.workload) return { run, lanes: [], drawn: [], metrics: {}, check: "", timed: false, marks: false };
  const lanes = orderLanes(run.lanes, run.laneConfigs).map((name) => {
    const records = run.records[name] || [];
    const config = resolvedConfig(run.laneConfigs, name);
    const kvBudget = Boolean(config.config.kv_budget);
    return { name, policy: config.policy, config, title: laneTitle(config), records, done: Boolean(run.done[name]),
      timeline: laneTimeline(records, run.workload), kvBudget, mayPreempt: kvBudget && traitsOf(config.policy).preempts,
      split: hasSplit(records), placement: records.length ? records[0].placement : undefined };  // core/tpsplit.js
  });
  const metrics = Object.fromEntries(lanes.map((l) => [l.name, metricsOf(l.records, run.workload)]));
  const drawn = lanes.flatMap((l) => {  // a P/D lane: its engines by role; a fleet: its replicas
    if (l.records.length && l.records[0].roles) return pdLanes(l, run.workload, metricsOf);
    return l.records.length && l.records[0].replicas ? replicaLanes(l, run.workload) : [l];
  });
  let check = "";
  if (run.serverMetrics) {
    const bad = mismatches(metrics, run.serverMetrics);
    check = bad.length ? bad.join(", ") : "ok";
  }
  const timed = isTimed(run.workload);
  const marks = timed || run.workload.requests.some((q) => (q.arrival || 0) > 0);
  return { run, lanes, drawn, metrics, check, timed, marks };
}

/**
 * A fleet lane (data_parallel_size, engine/fleet.py) as the sub-lanes the canvas draws, one per replica on the run's
 * clock: each from its replica's own records (a lane record like any other) over the requests the router sent it,
 * its arrival marks the routing decisions ({...arrival, replica, branch}). `fleet`: the lane it belongs to; `whole`
 * and `workload`: its own metrics and requests (the fleet's table row is the fleet lane's, derived.metrics); `loads`: its
 * load after each of its steps (requests running or waiting, core/fleetmetrics.js fleetLoads), `loadMax` the most any
 * replica of the fleet held, so the replicas' load bands share one scale.
 */
export function replicaLanes(lane, workload) {
  const routes = new Map(lane.records.flatMap((r) => r.routes || []).map((route) => [route.request, route]));
  const size = lane.records[0].replicas.length;
  const loads = fleetLoads(lane.records).map((series) => series.map(([, n]) => n));
  const loadMax = Math.max(1, ...loads.flat());
  const memo = fleetMemo.get(lane.records[0]) || new Map();
  fleetMemo.set(lane.records[0], memo);
  return Array.from({ length: size }, (_, i) => {
    const records = lane.records.map((r) => r.replicas[i]).filter(Boolean);
    const key = `${i}|${records.length}`;
    if (!memo.has(key)) memo.set(key, records);  // the same array while nothing changes: metrics stay memoized
    const own = memo.get(key);
    const mine = { ...workload, requests: workload.requests.filter((q) => routes.get(String(q.id))?.replica === i) };
    const timeline = laneTimeline(own, mine);
    timeline.arrivals = timeline.arrivals.map((a) => ({ ...a, replica: i, branch: routes.get(a.id).branch }));
    return { ...lane, name: `${lane.name}/${i}`, title: `${lane.name} \u00b7 replica ${i + 1} of ${size} \u00b7 ${lane.config.options.router}`,
      fleet: lane.name, replica: i, records: own, timeline, workload: mine, whole: metricsOf(own, mine), loads: loads[i], loadMax };
  });
}
const fleetMemo = new WeakMap();  // a fleet's first record -> its replicas' record arrays

function lastEnd(lane) {
  return lane.timeline.end[stepCount(lane.timeline)];
}

/** The x-axis span for both clocks; `previous` is last frame's (same run) or null. */
export function nextDomain(derived, previous) {
  const run = derived.run;
  if (!run || !derived.lanes.length) return { runId: null, steps: 1, ms: 1 };
  const steps = Math.max(...derived.lanes.map((l) => l.records.length));
  const ms = Math.max(...derived.lanes.map(lastEnd));
  if (run.status === RunStatus.FINISHED) return { runId: run.id, steps: Math.max(1, steps), ms: Math.max(1, ms) };
  const d = previous && previous.runId === run.id ? { ...previous } : { runId: run.id, steps: estimateSteps(run.workload), ms: 0 };
  if (steps > d.steps) d.steps = Math.ceil(steps * 1.25);
  if (!d.ms && steps) {  // a guess from the steps so far; no lane ends before its last request arrives
    const lastArrival = Math.max(0, ...run.workload.requests.map((q) => q.arrival_ms || 0));
    const perStep = Math.max(...derived.lanes.map((l) => (l.records.length ? (lastEnd(l) - l.timeline.starts[0]) / l.records.length : 0)));
    d.ms = Math.max((ms / steps) * d.steps, lastArrival + perStep * 8) * 1.1;
  }
  if (ms > d.ms) d.ms = ms * 1.25;
  return { ...d, ms: Math.max(1, d.ms) };
}

/** Where a lane's last step ends on `clock` (a P/D engine's, on the step clock: the lane step it last ran in). */
function laneEnd(lane, clock) {
  if (clock === "steps" && lane.positions) return lane.positions[lane.positions.length - 1] || 0;
  return clock === "steps" ? lane.records.length : lastEnd(lane);
}

/** A lane's step under the playhead; one past its last step once it is done and the playhead has passed its end. */
function laneStep(lane, clock, t) {
  if (lane.done && t > laneEnd(lane, clock) + 1e-9) return lane.records.length + 1;
  if (clock === "steps" && lane.positions) return lane.positions.filter((k) => k <= Math.ceil(t - 1e-9)).length;
  return stepAt(lane.timeline, clock, t);
}

/** Row labels of a lane: its slots, or its requests in the request view. */
export function laneRows(lane, view, workload) {
  if (view === "requests") return lane.timeline.ids;
  const slots = lane.records.length ? lane.records[0].slots.length : (lane.config.config.slots || 0);
  return Array.from({ length: slots }, (_, i) => `slot ${i + 1}`);
}

/**
 * A lane's caption at the playhead: its final numbers once the playhead has passed its last step ("15 steps ·
 * 1.93 tokens/step · slot use 48%"), else the numbers so far ("step 2 of 15 · 2.00 tokens/step · slot use 50%").
 */
function caption(lane, shown, m, clock) {
  const n = lane.records.length;
  if (!n) return lane.done ? "no steps" : "waiting for the first step";
  const numbers = [`${m.tokens_per_step.toFixed(2)} tokens/step`, `slot use ${Math.round(m.slot_use * 100)}%`];
  if (clock === "ms" && m.wall_s !== null && shown > 0) numbers.push(`${m.wall_s.toFixed(2)} s`);
  if (m.preemptions) numbers.push(`${m.preemptions} preempted${m.swaps ? ` (${m.swaps} swapped out)` : ""}`);  // swaps: of those
  if (lane.done && shown >= n) return [count(n, "step"), ...numbers].join(" \u00b7 ");
  const where = `step ${shown} of ${n}${lane.done ? "" : " so far"}`;
  return shown > 0 ? [where, ...numbers].join(" \u00b7 ") : where;
}

/** A lane's KV use at its step under the playhead ({used, total, unit}), or null before its first step. */
function kvAt(lane, step) {
  return lane.timeline.kv[Math.min(step, lane.records.length) - 1] || null;
}

function kvLabel(point) {
  if (!point) return "KV memory";
  return `KV ${point.used}/${point.total} ${point.unit === "blocks" ? "blk" : "tok"}`;
}

/** The SLO a frame holds the run to: the teacher's targets (`override`), else the workload's own, else null. */
export function sloOf(derived, override = null) {
  return override || (derived.run && derived.run.workload && derived.run.workload.slo) || null;
}

/** What the legend explains for a run on a clock and view: {view, preemption, waiting, marks, prefixCache,
 * speculative, swap, swapOnly, slo (targets set: the TTFT deadline, in the request view, and the missed mark), fleet
 * (a lane is a fleet: its routing marks and its replicas' load bands), fleetOnly (every lane is: no plain arrival marks),
 * pd (a lane is a P/D lane: its hand-offs' transfer marks)}. */
export function legendFlags(derived, { view, clock, slo = null }) {
  const preemption = Boolean(derived.run && derived.run.workload && derived.run.workload.kv_budget)
    || derived.lanes.some((l) => l.config.options.kv_budget) || Object.values(derived.metrics).some((m) => m.preemptions > 0);
  // The legend explains waiting when some lane shows it on this clock.
  const waiting = derived.lanes.some((l) => l.timeline.waits.size || (clock === "ms" && l.timeline.gaps.length));
  const prefixCache = Object.values(derived.metrics).some((m) => m.prompt_tokens_cached > 0);
  const speculative = derived.lanes.some((l) => l.config.options.speculative)
    || Boolean(derived.run && derived.run.workload && derived.run.workload.speculative);
  // a lane that swaps its victims out (preemption "swap") shows the swapped state; swapOnly: no lane recomputes
  const swapping = derived.lanes.map((l) => l.config.options.preemption === "swap"
    || l.records.some((r) => r.slots.some((c) => c.state === SlotState.SWAPPED)));
  const swap = swapping.some(Boolean);
  const swapOnly = swap && swapping.every(Boolean);
  const drawn = derived.drawn || [];
  const fleets = drawn.map((l) => l.fleet !== undefined && !l.pd);  // routing marks and load bands
  const pd = drawn.some((l) => l.pd);  // a P/D lane: its prefill and decode engines, the hand-offs' copies
  const split = drawn.some((l) => l.split);  // a tensor-parallel lane: compute and all-reduce bars
  return { view, preemption, waiting, marks: derived.marks, prefixCache, speculative, swap, swapOnly, split,
    slo: Boolean(sloOf(derived, slo)), fleet: fleets.some(Boolean), fleetOnly: fleets.length > 0 && fleets.every(Boolean), pd };
}

const verdictMemo = new WeakMap();  // a lane's whole metrics -> {slo, value}: its requests' SLO verdicts

function verdictsOf(whole, slo) {
  const memo = verdictMemo.get(whole);
  if (memo && memo.slo === slo) return memo.value;
  const value = sloVerdicts(whole.requests, slo);
  verdictMemo.set(whole, { slo, value });
  return value;
}

/**
 * What the renderer draws this frame; each lane carries `metrics`, its numbers up to its step at the playhead (their
 * SLO figures under `slo`, the teacher's targets, when given), `kvAt`, its KV use there, and `slo` with `verdicts`:
 * the targets the frame holds it to and each returned request's verdict (core/slo.js sloVerdicts) over the whole run.
 */
export function buildScene(derived, { view, clock, t, focus, slo: override = null }) {
  const slo = sloOf(derived, override);
  const atPlayhead = (lane) => {
    const step = laneStep(lane, clock, t);
    const gap = clock === "ms" && step <= lane.records.length ? gapAt(lane.timeline, t) : null;
    const shown = Math.min(step, lane.records.length);
    const whole = lane.whole || derived.metrics[lane.name];
    let metrics = metricsUpTo(lane, shown, lane.workload || derived.run.workload, whole);
    if (override) metrics = withSlo(metrics, override);  // the teacher's targets: the figures the table shows
    const kv = kvAt(lane, gap ? step - 1 : step);
    // ended: done, and the playhead at its end or past it (the longest lane's end is where the playhead stops)
    const ended = Boolean(lane.done) && t >= laneEnd(lane, clock) - 1e-9;
    return { ...lane, step, gap, ended, revealed: shown, metrics, caption: caption(lane, shown, metrics, clock), kvAt: kv,
      kvLabel: kvLabel(kv), slo, verdicts: whole ? verdictsOf(whole, slo) : new Map() };
  };
  // `rows`: the run's lanes (the metrics table's rows: a fleet is one); `lanes`: what the canvas draws (a fleet's replicas)
  const rows = derived.lanes.map(atPlayhead);
  const lanes = (derived.drawn || derived.lanes).map((lane) => (lane.fleet === undefined ? rows.find((r) => r.name === lane.name)
    : atPlayhead(lane)));
  return { lanes, rows, clock, t, focus, ...legendFlags(derived, { view, clock, slo }), sloTargets: slo,
    timed: derived.timed };
}
