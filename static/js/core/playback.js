/**
 * The playback clock: where the shared playhead is, whether it moves and how fast. Time on the page
 * belongs to the client: the playhead advances by the frame's dt, never by what the server sends;
 * it only stops at the edge of what has arrived. On the step clock every step is one unit; on the
 * milliseconds clock each lane's steps last what they measured and its waits for arrivals what it waited.
 * All functions are pure.
 */

export const SPEEDS = Object.freeze([0.25, 0.5, 1, 2, 4, 8]);
export const STEPS_PER_SECOND = 1.5;   // 1x on the step clock
export const MS_PER_SECOND = 250;      // 1x on the milliseconds clock: the measured time, 4x slowed down

export function createPlayback() {
  return { t: 0, playing: false, speed: 1, clock: "steps" };
}

/**
 * How far the playhead may go: `lanes` = [{end, done}] with end[s] the lane clock at the end of step s
 * (end[0] = 0); an unfinished lane caps the ms clock at what it has measured.
 */
export function extent(lanes, clock) {
  if (!lanes.length) return 0;
  if (clock === "steps") return Math.max(...lanes.map((l) => l.end.length - 1));
  const totals = lanes.map((l) => l.end[l.end.length - 1]);
  const open = lanes.filter((l) => !l.done).map((l) => l.end[l.end.length - 1]);
  return open.length ? Math.min(...open) : Math.max(...totals);
}

/** Every step boundary on the current clock, sorted (where ±1 steps land): on the ms clock each step's start and end. */
export function boundaries(lanes, clock) {
  if (clock === "steps") return Array.from({ length: extent(lanes, clock) + 1 }, (_, i) => i);
  return [...new Set(lanes.flatMap((l) => [...l.end, ...l.starts]))].sort((a, b) => a - b);
}

export function advance(pb, dt, limit, finished) {
  if (!pb.playing) return pb;
  const rate = pb.clock === "steps" ? STEPS_PER_SECOND : MS_PER_SECOND;
  const t = Math.max(pb.t, Math.min(limit, pb.t + dt * rate * pb.speed));
  const playing = !(finished && t >= limit);
  return t === pb.t && playing ? pb : { ...pb, t, playing };
}

/** The playhead to draw: with reduced motion it moves a whole step at a time instead of gliding. */
export function shownTime(pb, reduced, edges) {
  if (!reduced) return pb.t;
  let shown = 0;
  for (const e of edges) if (e <= pb.t + 1e-9) shown = e;
  return shown;
}

export function togglePlay(pb, limit, finished) {
  if (pb.playing) return { ...pb, playing: false };
  const atEnd = finished && pb.t >= limit - 1e-9;
  return { ...pb, playing: true, t: atEnd ? 0 : pb.t };
}

export function stepBy(pb, delta, edges) {
  const eps = 1e-9;
  const target = delta > 0 ? edges.find((e) => e > pb.t + eps) : [...edges].reverse().find((e) => e < pb.t - eps);
  return { ...pb, playing: false, t: target === undefined ? pb.t : target };
}

export function seek(pb, t, limit) {
  return { ...pb, t: Math.max(0, Math.min(limit, t)) };
}

export function changeSpeed(pb, direction) {
  const i = SPEEDS.indexOf(pb.speed);
  const next = SPEEDS[Math.max(0, Math.min(SPEEDS.length - 1, (i < 0 ? 2 : i) + direction))];
  return { ...pb, speed: next };
}

/**
 * Switch clocks keeping the playhead at the same moment of `reference` (the lane with the most steps):
 * a fraction of a step maps to the same fraction of its measured time; a moment in a gap (the lane
 * waiting for arrivals) maps to the boundary before the next step.
 */
export function switchClock(pb, clock, reference) {
  if (clock === pb.clock || !reference) return { ...pb, clock };
  const { starts, ends, end } = reference;
  const n = ends.length;
  let t = 0;
  if (clock === "ms") {
    const s = Math.min(n, Math.floor(pb.t));
    const f = pb.t - s;
    t = s >= n ? end[n] : f > 0 ? starts[s] + f * (ends[s] - starts[s]) : end[s];
  } else {
    let s = 0;  // steps that ended at or before the playhead
    while (s < n && ends[s] <= pb.t) s += 1;
    t = s >= n || pb.t <= starts[s] ? s : s + (pb.t - starts[s]) / Math.max(1e-9, ends[s] - starts[s]);
  }
  return { ...pb, clock, t };
}

/**
 * A memo of a run's clock facts: how far the playhead may go, where ±1 lands, and whether more can arrive, computed
 * once per (run, clock). `finishedStatus`: the run status that means every lane is done.
 */
export function createClockInfo(finishedStatus) {
  let memo = { key: [], value: null };
  return function clockInfo(derived, clock) {
    const key = [derived, clock];
    if (key.every((k, i) => k === memo.key[i])) return memo.value;
    const lanes = derived.lanes.map((l) => ({ end: l.timeline.end, starts: l.timeline.starts, done: l.done }));
    memo = { key, value: { limit: extent(lanes, clock), edges: boundaries(lanes, clock),
      finished: Boolean(derived.run && derived.run.status === finishedStatus) } };
    return memo.value;
  };
}
