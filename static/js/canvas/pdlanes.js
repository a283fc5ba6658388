/**
 * A P/D lane (prefill and decode engines, engine/disaggregation.py) as the sub-lanes the canvas draws, one per engine
 * on the run's shared clock, labelled by role: a prefill engine's arrival marks are the requests sent to it; a decode
 * engine's are its hand-offs, each with the copy that brought the request's KV blocks (`transfer`: blocks, bytes, ms,
 * start_ms, the prefill engine it came from), which the renderer draws as a band from the copy's start to its end
 * and a mark where the request joined the decode engine's queue, with a line down from the prefill engine it left.
 * Pure functions of the records; of pixels it knows only the rectangles and lines it is handed the clock and layout for
 * (`transferBand`, `handoffLines`).
 */
import { laneTimeline } from "../core/timeline.js";

const memo = new WeakMap();  // a P/D lane's first record -> its engines' record arrays (the same array while unchanged)

/** The copy a hand-off made is ready (the request in the decode engine's queue) at its start plus its ms. */
export function readyMs(t) {
  return t.start_ms + t.ms;
}

/**
 * Each engine's sub-lane: {...lane, name "<lane>/prefill<i>" or "<lane>/decode<j>", title, fleet (the P/D lane's
 * name: a sub-lane, as a fleet's replica is), replica (its index among all engines), pd: {role, index, count},
 * records (its own), positions (the lane step each of them ran in), workload (its requests: a decode engine's arrive
 * when their copy is done), timeline, whole}.
 * `metricsOf(records, workload)`: the memoized lane metrics.
 */
export function pdLanes(lane, workload, metricsOf) {
  const roles = lane.records[0].roles;
  const P = roles.filter((r) => r === "prefill").length;
  const routes = new Map(lane.records.flatMap((r) => r.routes || []).map((route) => [route.request, route]));
  const handoffs = new Map(lane.records.flatMap((r, k) => (r.transfers || []).map((t) => [t.request, { ...t, step: k + 1 }])));
  const cache = memo.get(lane.records[0]) || new Map();
  memo.set(lane.records[0], cache);
  return roles.map((role, i) => {
    const steps = [];  // the lane step of each of this engine's records
    const records = [];
    lane.records.forEach((r, k) => {
      if (r.replicas[i]) { steps.push(k + 1); records.push(r.replicas[i]); }
    });
    const key = `${i}|${records.length}`;
    if (!cache.has(key)) cache.set(key, records);
    const own = cache.get(key);
    const index = role === "prefill" ? i : i - P;
    const count = role === "prefill" ? P : roles.length - P;
    const mine = role === "prefill"
      ? workload.requests.filter((q) => routes.get(String(q.id))?.replica === i)
      : workload.requests.filter((q) => handoffs.get(String(q.id))?.decode === index).map((q) => {
        const t = handoffs.get(String(q.id));  // it arrives here when its copy is done (ms), or the step after it
        return q.arrival_ms !== undefined && q.arrival_ms !== null ? { ...q, arrival_ms: readyMs(t) }
          : { ...q, arrival: steps.filter((s) => s <= t.step).length };
      });
    const mineWorkload = { ...workload, requests: mine };
    const timeline = laneTimeline(own, mineWorkload);
    // on the step clock an engine's steps stand at the lane steps they ran in (`positions`), and so do its marks: at
    // the first of its steps the request could join
    const atLaneStep = (a) => (a.arrival < steps.length ? steps[a.arrival] - 1 : lane.records.length);
    timeline.arrivals = timeline.arrivals.map((a) => ({ ...a, arrival: atLaneStep(a),
      ...(role === "decode" ? { transfer: handoffs.get(a.id) } : {}) }));
    const word = role === "prefill" ? "prefill engine" : "decode engine";
    return { ...lane, name: `${lane.name}/${role}${index}`, title: `${lane.name} \u00b7 ${word} ${index + 1} of ${count}`,
      fleet: lane.name, replica: i, pd: { role, index, count }, records: own, positions: steps, timeline, workload: mineWorkload,
      whole: metricsOf(own, mineWorkload) };
  });
}

/** A hand-off's band in a decode sub-lane's mark band: from its copy's start to its end, at least `least` px wide. */
export function transferBand(timeX, band, t, least = 3) {
  const x0 = timeX(t.start_ms);
  const x1 = Math.max(x0 + least, timeX(readyMs(t)));
  return { x: Math.round(x0), y: band.y, w: Math.round(x1 - x0), h: band.h };
}

/**
 * The hand-offs as lines between the sub-lanes: for each copy done by `t` on a decode engine's lane of `placed`
 * (layout.js lanes, each with its scene lane in `drawn` by name), from the bottom of the prefill engine's grid it
 * left to the top of the decode engine's mark band, at the copy's end: [{request, x, y0, y1}].
 */
export function handoffLines(placed, drawn, timeX, t) {
  const byName = new Map(placed.map((l) => [l.name, l]));
  return drawn.filter((d) => d.pd && d.pd.role === "decode" && byName.has(d.name)).flatMap((d) => {
    const to = byName.get(d.name);
    return d.timeline.arrivals.filter((a) => a.transfer && a.arrival_ms <= t + 1e-9).flatMap((a) => {
      const from = byName.get(`${d.fleet}/prefill${a.transfer.prefill}`);
      return from ? [{ request: a.id, x: Math.round(timeX(a.arrival_ms)) + 0.5, y0: from.grid.y + from.grid.h, y1: to.marks.y }] : [];
    });
  });
}
