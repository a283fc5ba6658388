/**
 * From a run to what one frame shows: the lanes in page order with their derived timelines and
 * metrics (memoized per records array), the x-axis domain (which only grows while a run streams, so
 * cells do not shrink every tick), each lane's step under the playhead, and the scene the renderer
 * draws. Pure functions of their inputs, apart from the memo caches.
 */
import { laneMetrics, mismatches } from "./metrics.js";
import { estimateSteps, laneTimeline, perRecords, stepAt } from "./timeline.js";
import { LANE_ORDER, RunStatus } from "./vocab.js";

const metricsOf = perRecords(laneMetrics);

let last = { run: undefined, value: null };

/** {run, lanes: [{name, records, done, timeline}], metrics: {lane: m}, check: "" | "ok" | "a, b"}; once per run object. */
export function deriveRun(run) {
  if (run !== last.run) last = { run, value: derive(run) };
  return last.value;
}

function derive(run) {
  if (!run || !run.workload) return { run, lanes: [], metrics: {}, check: "" };
  const names = [...run.lanes].sort((a, b) => LANE_ORDER.indexOf(a) - LANE_ORDER.indexOf(b));
  const lanes = names.map((name) => {
    const records = run.records[name] || [];
    return { name, records, done: Boolean(run.done[name]), timeline: laneTimeline(records, run.workload) };
  });
  const metrics = Object.fromEntries(lanes.map((l) => [l.name, metricsOf(l.records, run.workload)]));
  let check = "";
  if (run.serverMetrics) {
    const bad = mismatches(metrics, run.serverMetrics);
    check = bad.length ? bad.join(", ") : "ok";
  }
  return { run, lanes, metrics, check };
}

/** The x-axis span for both clocks; `previous` is last frame's (same run) or null. */
export function nextDomain(derived, previous) {
  const run = derived.run;
  if (!run || !derived.lanes.length) return { runId: null, steps: 1, ms: 1 };
  const steps = Math.max(...derived.lanes.map((l) => l.records.length));
  const ms = Math.max(...derived.lanes.map((l) => l.timeline.cum[l.timeline.cum.length - 1]));
  if (run.status === RunStatus.FINISHED) return { runId: run.id, steps: Math.max(1, steps), ms: Math.max(1, ms) };
  const d = previous && previous.runId === run.id ? { ...previous } : { runId: run.id, steps: estimateSteps(run.workload), ms: 0 };
  if (steps > d.steps) d.steps = Math.ceil(steps * 1.25);
  if (!d.ms && steps) d.ms = (ms / steps) * d.steps * 1.1;  // a guess from the steps so far
  if (ms > d.ms) d.ms = ms * 1.25;
  return { ...d, ms: Math.max(1, d.ms) };
}

/** A lane's step under the playhead; one past its last step once it is done and the playhead has passed its end. */
function laneStep(lane, clock, t) {
  const n = lane.records.length;
  const end = clock === "steps" ? n : lane.timeline.cum[n];
  if (lane.done && t > end + 1e-9) return n + 1;
  return stepAt(lane.timeline, clock, t);
}

/** Row labels of a lane: its slots, or its requests in the request view. */
export function laneRows(lane, view, workload) {
  if (view === "requests") return lane.timeline.ids;
  const slots = lane.records.length ? lane.records[0].slots.length : workload.slots || 4;
  return Array.from({ length: slots }, (_, i) => `slot ${i + 1}`);
}

function caption(lane, m, clock) {
  const n = lane.records.length;
  if (!lane.done) return n ? `${n} steps so far` : "waiting for the first step";
  const parts = [`${n} steps`, `${m.tokens_per_step.toFixed(2)} tokens/step`, `slot use ${Math.round(m.slot_use * 100)}%`];
  if (clock === "ms" && m.wall_s !== null) parts.push(`${m.wall_s.toFixed(2)} s`);
  if (m.preemptions) parts.push(`${m.preemptions} preempted`);
  return parts.join(" \u00b7 ");
}

function kvLabel(lane, step) {
  const point = lane.timeline.kv[Math.min(step, lane.records.length) - 1];
  if (!point) return "KV memory";
  return `KV ${point.used}/${point.total} ${point.unit === "blocks" ? "blk" : "tok"}`;
}

/** What the renderer draws this frame. */
export function buildScene(derived, { view, clock, t, focus }) {
  const lanes = derived.lanes.map((lane) => {
    const step = laneStep(lane, clock, t);
    return { ...lane, step, revealed: Math.min(step, lane.records.length),
      caption: caption(lane, derived.metrics[lane.name], clock), kvLabel: kvLabel(lane, step) };
  });
  const preemption = Boolean(derived.run && derived.run.workload && derived.run.workload.kv_budget)
    || Object.values(derived.metrics).some((m) => m.preemptions > 0);
  return { lanes, view, clock, t, focus, preemption };
}
