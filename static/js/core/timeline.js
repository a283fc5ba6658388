/**
 * Per-lane views derived from the step records, computed once per records array (memoized on its
 * identity, which changes only when a tick arrives): the lane clock (each step's start and end in
 * ms, the gaps where the lane waited for arrivals, the steps that computed nothing), where each
 * request arrives on this lane, each request's phase in every step (the request view), the KV series
 * for the memory bar, each preemption (step, request, slot), and which requests were prefilled in
 * chunks. Pure: it reads records and never changes them.
 */
import { arrivalOf, evictions, laneTimes } from "./metrics.js";
import { Forward, Phase, SlotState } from "./vocab.js";

const EPS = 1e-6;

function kvPoint(r) {
  // A block budget when the lane has one; otherwise KV tokens against the lane's capacity.
  if (r.kv_blocks_total > 0) return { used: r.kv_blocks_used, total: r.kv_blocks_total, unit: "blocks" };
  return { used: r.kv_used, total: r.kv_capacity, unit: "tokens" };
}

function phasesOf(records, ids) {
  const phases = new Map(ids.map((id) => [id, []]));   // id -> phase per step (index s - 1), null: not arrived
  const slotOf = new Map(ids.map((id) => [id, []]));    // id -> slot index per step, null: in no slot
  const prefillSteps = new Map(ids.map((id) => [id, 0]));
  const returned = new Set();
  records.forEach((r, i) => {
    const seen = new Map();
    r.slots.forEach((cell, slot) => {
      if (cell.request !== null && phases.has(cell.request)) seen.set(cell.request, [cell.state, slot]);
      if (cell.state === SlotState.PREFILL && prefillSteps.has(cell.request)) {
        prefillSteps.set(cell.request, prefillSteps.get(cell.request) + 1);
      }
    });
    const waiting = new Set(r.waiting);
    for (const id of ids) {
      let phase = null;
      let slot = null;
      if (seen.has(id)) [phase, slot] = seen.get(id);
      else if (waiting.has(id)) phase = Phase.QUEUED;
      else if (returned.has(id)) phase = Phase.DONE;
      phases.get(id)[i] = phase;
      slotOf.get(id)[i] = slot;
    }
    for (const id of r.returned) returned.add(id);
  });
  const chunked = new Set([...prefillSteps].filter(([, n]) => n > 1).map(([id]) => id));
  return { phases, slotOf, chunked };
}

function build(records, workload) {
  const ids = workload.requests.map((q) => String(q.id));
  const { starts, ends } = laneTimes(records);
  const end = [0, ...ends];  // end[s]: the lane clock when step s ended (end[0]: the lane's start)
  // A gap: the lane had nothing to compute and its clock jumped to the next arrival before step `step`.
  const gaps = [];
  starts.forEach((start, i) => {
    if (start > end[i] + EPS) gaps.push({ step: i + 1, from: end[i], to: start });
  });
  // Steps that computed nothing (forward "none"): the lane waited a step's time for its queue or arrivals.
  const waits = new Set(records.filter((r) => r.forward === Forward.NONE).map((r) => r.step));
  const arrivals = workload.requests.map((q) => ({ id: String(q.id), ...arrivalOf(q, starts, end) }))
    .sort((a, b) => a.arrival_ms - b.arrival_ms);
  // Each eviction (the metrics' `evictions`): the step it happened in, the request that lost its slot, that slot, and
  // whether it was swapped out (its KV copied to the host pool) rather than dropped to be recomputed.
  const preemptions = records.flatMap((r) => evictions(r).map(({ id, swapped }) => ({ step: r.step, id,
    slot: r.slots.findIndex((c) => c.request === id), swapped })));
  return { ids, starts, ends, end, gaps, waits, arrivals, preemptions, ...phasesOf(records, ids), kv: records.map(kvPoint) };
}

/** `fn(records, workload)` computed once per records array and workload (a tick replaces a lane's array). */
export function perRecords(fn) {
  const memo = new WeakMap();
  return (records, workload) => {
    let entry = memo.get(records);
    if (!entry || entry.workload !== workload) {
      entry = { workload, value: fn(records, workload) };
      memo.set(records, entry);
    }
    return entry.value;
  };
}

/** The derived view of one lane's records. */
export const laneTimeline = perRecords(build);

/** How many steps a lane has recorded. */
export function stepCount(timeline) {
  return timeline.end.length - 1;
}

/** The step of a lane under a playhead at `t` (in the clock's unit): 0 before its first step; in a gap, the step after it. */
export function stepAt(timeline, clock, t) {
  const n = stepCount(timeline);
  if (clock === "steps") return Math.min(n, Math.max(0, Math.ceil(t - 1e-9)));
  let s = 0;
  while (s < n && timeline.end[s] < t - 1e-9) s += 1;
  return s;
}

/** The gap the lane waits in at `t` ms (after its previous step ended, before the next starts), or null. */
export function gapAt(timeline, t) {
  return timeline.gaps.find((g) => g.from < t - 1e-9 && t <= g.to + 1e-9) || null;
}

/** How many steps a static lane needs at most: groups of `slots` in arrival order, each as long as its longest. */
export function estimateSteps(workload) {
  const slots = workload.slots || 4;
  const reqs = [...workload.requests].sort((a, b) => (a.arrival || 0) - (b.arrival || 0));
  let t = 0;
  for (let i = 0; i < reqs.length; i += slots) {
    const group = reqs.slice(i, i + slots);
    t = Math.max(t, ...group.map((q) => q.arrival || 0)) + Math.max(...group.map((q) => q.max_new_tokens || 1));
  }
  return Math.max(1, t);
}
