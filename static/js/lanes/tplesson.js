/**
 * The tensor-parallel lesson's numbers and its claim (preset tensor-parallel, docs/parallelism.md), from the lanes'
 * step records: `{lane.median_step_ms}` (the median of its steps that computed), `{lane.allreduce_share}` (of a
 * tensor-parallel lane's forward time over the run, the share its ranks spent in all-reduces), `{lane.machine}` (its
 * placement's cores and memory domains), and the check that the
 * split lane is slower here than the lanes of one process beside it. Pure functions of a derived run's lanes.
 */

function computed(lane) {
  return lane.records.filter((r) => r.forward !== "none" && r.ms > 0);
}

/** The median ms of a lane's steps that computed (null: none did). */
export function medianStep(lane) {
  const ms = computed(lane).map((r) => r.ms).sort((a, b) => a - b);
  if (!ms.length) return null;
  const mid = Math.floor(ms.length / 2);
  return ms.length % 2 ? ms[mid] : (ms[mid - 1] + ms[mid]) / 2;
}

/** Of a tensor-parallel lane's forward time (compute + all-reduce, summed over its steps), the all-reduces' share. */
export function allreduceShare(lane) {
  const split = lane.records.filter((r) => typeof r.allreduce_ms === "number");
  const total = split.reduce((n, r) => n + r.compute_ms + r.allreduce_ms, 0);
  return total > 0 ? split.reduce((n, r) => n + r.allreduce_ms, 0) / total : null;
}

/** A lesson placeholder's value for these keys (undefined: not one of them). */
export function tpValue(lane, key) {
  if (key === "median_step_ms") {
    const v = medianStep(lane);
    return v === null ? null : String(Math.round(v));
  }
  if (key === "allreduce_share") {
    const v = allreduceShare(lane);
    return v === null ? null : `${Math.round(v * 100)}%`;
  }
  if (key === "machine") {  // where a split lane ran (its first record's placement): "2 cores, one memory domain"
    const p = lane.records.length ? lane.records[0].placement : null;
    if (!p) return null;
    return `${p.cores} core${p.cores === 1 ? "" : "s"}, ${p.memory_domains === 1 ? "one memory domain" : `${p.memory_domains} memory domains`}`;
  }
  return undefined;
}

/** `lane` (tensor-parallel) has a longer median step than each of `others`: on one memory domain the split adds
 * all-reduces and no bandwidth. */
export function tpSlowerHere(derived, { lane, others }, laneOf, why) {
  const mine = laneOf(derived, lane);
  if (!mine || others.some((o) => !laneOf(derived, o))) return null;
  const ms = medianStep(mine);
  const level = others.filter((o) => medianStep(laneOf(derived, o)) >= ms);
  if (!level.length) return { holds: true };
  return { holds: false, text: `yet on this run its median step (${Math.round(ms)} ms) was no longer than ${level.map((o) =>
    `${o}'s (${Math.round(medianStep(laneOf(derived, o)))} ms)`).join(" and ")}, not the usual result (${why(derived, [lane, ...level])})` };
}
