/**
 * Two stored runs as the compare page sees them: a stored run (`GET /api/runs/<id>`) turned into the
 * `run` object the main page's modules expect (state.js's shape, finished), derived once with
 * scene.js's deriveRun, and both runs' lanes put on ONE clock: the x-axis domain is the longer run,
 * the playhead may go to the later end, and ±1 lands on every step boundary of either run. A lane of
 * run A is named "A · static" wherever the two runs meet (scene, layout, probe), so the same lane name
 * in both runs stays two lanes. Pure; knows nothing of the DOM or the canvas.
 */
import { deriveRun, laneRows, nextDomain } from "../canvas/scene.js";
import { RunStatus } from "../core/vocab.js";

/** The two sides, in page order: run A's lanes above run B's. */
export const LABELS = Object.freeze(["A", "B"]);

/** "A · static": a lane's name on the compare page. */
export function sideName(label, lane) {
  return `${label} \u00b7 ${lane}`;
}

/** The run object scene.js / metrics.js read (state.js newRun's fields), for a finished stored run. */
export function toRun(stored) {
  const lanes = [...stored.lanes];
  const records = Object.fromEntries(lanes.map((lane) => [lane, stored.records[lane] || []]));
  return {
    id: stored.run_id, status: RunStatus.FINISHED, own: false, position: null, lanes,
    workload: { ...stored.workload, requests: stored.requests || [] }, laneConfigs: stored.lane_configs || {},
    model: stored.model || "",
    t: Math.max(0, ...lanes.map((lane) => records[lane].length)),
    records, done: Object.fromEntries(lanes.map((lane) => [lane, true])), serverMetrics: stored.metrics || null,
  };
}

/**
 * One side of the comparison: {label, id, created, model, run, derived}. deriveRun keeps one run in its
 * memo, so each side is derived once here and kept (a stored run never changes).
 */
export function sideOf(label, stored) {
  const run = toRun(stored);
  return { label, id: stored.run_id, created: stored.created, model: run.model, run, derived: deriveRun(run) };
}

/** The x-axis span of both runs on both clocks: the longer run's steps and its later end in ms. */
export function sharedDomain(sides) {
  const domains = sides.map((s) => nextDomain(s.derived, null));
  return { steps: Math.max(1, ...domains.map((d) => d.steps)), ms: Math.max(1, ...domains.map((d) => d.ms)) };
}

/** Every lane of both runs as playback.js reads lanes ({end, starts, done}), for extent and boundaries. */
export function clockLanes(sides) {
  return sides.flatMap((s) => s.derived.lanes.map((l) => ({ end: l.timeline.end, starts: l.timeline.starts, done: true })));
}

/** The lane with the most steps of either run: the reference a clock switch keeps the playhead on. */
export function longestTimeline(sides) {
  const lanes = sides.flatMap((s) => s.derived.lanes);
  const longest = lanes.reduce((best, l) => (!best || l.records.length > best.records.length ? l : best), null);
  return longest && longest.timeline;
}

/** The clock a comparison opens on: milliseconds when either run's arrivals are in ms (steps would hide every wait). */
export function defaultClock(sides) {
  return sides.some((s) => s.derived.timed) ? "ms" : "steps";
}

/**
 * Both runs' drawn lanes, A's first, as computeLayout takes them (named "A · static"): a fleet's replicas and a P/D
 * lane's engines, as the main page draws them (buildScene's lanes are these).
 */
export function layoutLanes(sides, view) {
  return sides.flatMap((s) => (s.derived.drawn || s.derived.lanes).map((l) => ({
    name: sideName(s.label, l.name), title: `${s.label} \u00b7 ${l.title}`, side: s.label,
    rows: laneRows(l, view, l.workload || s.run.workload), starts: l.timeline.starts, ends: l.timeline.ends,
    gaps: l.timeline.gaps, arrivals: s.derived.marks ? l.timeline.arrivals : null, positions: l.positions })));
}

/**
 * One scene of both runs: each side's scene (scene.js buildScene) with its lanes renamed "A · static"
 * and titled "A · Static batching"; the legend shows what either side shows.
 */
export function mergeScenes(sides, scenes) {
  const lanes = sides.flatMap((s, i) => scenes[i].lanes.map((l) => ({
    ...l, name: sideName(s.label, l.name), title: `${s.label} \u00b7 ${l.title}`, lane: l.name, side: s.label })));
  const any = (key) => scenes.some((sc) => sc[key]);
  const { view, clock, t, focus } = scenes[0];
  return { lanes, view, clock, t, focus, preemption: any("preemption"), waiting: any("waiting"), marks: any("marks"),
    speculative: any("speculative"),
    timed: any("timed") };
}

/**
 * Lane names in the order the metrics table pairs them: A's lanes, then B's lanes A lacks;
 * each with the sides that have it.
 */
export function pairedLanes(sides) {
  const names = [];
  for (const s of sides) for (const l of s.derived.lanes) if (!names.includes(l.name)) names.push(l.name);
  return names.map((name) => ({ name, sides: sides.filter((s) => s.derived.metrics[name]).map((s) => s.label) }));
}
