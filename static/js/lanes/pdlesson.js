/**
 * The P/D lesson's claims and numbers (preset pd-vs-colocated, docs/disaggregation.md): a P/D lane's decoders never
 * stall (its ITL p99 below each colocated lane's), and its first tokens come later, by the KV copy and the decode
 * queue (its TTFT p50 above theirs). Each check returns null while a lane it names still runs, {holds: true} where
 * the run bears it out, else {holds: false, text} with the run's own numbers. `pdValue` fills a lesson's
 * `{lane.pd_*}` placeholders. Pure functions of a derived run (canvas/scene.js) and its metrics.
 */
const whole = (v) => (v < 10 ? v.toFixed(1) : String(Math.round(v)));
const ms = (v) => `${whole(v)} ms`;

/**
 * A lesson placeholder `{lane.pd_KEY}`: KEY of the lane's `pd` figures (blocks, ms, mean_decode_queue_ms, ...) or of
 * its metrics (p99_itl_ms, p50_ttft_ms: any lane's), a time in whole ms (one decimal under 10); undefined for a key
 * without the `pd_` prefix, null when the lane has no such number.
 */
export function pdValue(m, key) {
  if (!key.startsWith("pd_")) return undefined;
  const k = key.slice(3);
  const v = m.pd && k in m.pd ? m.pd[k] : m[k];
  if (typeof v !== "number") return null;
  return k === "ms" || k.endsWith("_ms") ? whole(v) : String(v);
}

/** `lane` (a P/D lane) has a lower ITL p99 than each of `others`: its decode engine never waits behind a prefill. */
export function decodersNeverStall(derived, { lane, others }, laneOf, why) {
  if (!laneOf(derived, lane) || others.some((o) => !laneOf(derived, o))) return null;
  const m = derived.metrics;
  const mine = m[lane].p99_itl_ms;
  const level = others.filter((o) => m[o].p99_itl_ms <= mine);
  if (!level.length) return { holds: true };
  return { holds: false, text: `yet on this run its ITL p99 (${ms(mine)}) was no lower than ${
    level.map((o) => `${o}'s (${ms(m[o].p99_itl_ms)})`).join(" and ")}, not the usual result (${why(derived, [lane, ...level])})` };
}

/**
 * `lane` (a P/D lane) has a higher TTFT p50 than each of `others`, and its requests' first tokens waited on a copy:
 * the transfer, the decode queue and the first decode step are the parts a colocated lane does not have.
 */
export function firstTokensLaterByCopy(derived, { lane, others }, laneOf, why) {
  if (!laneOf(derived, lane) || others.some((o) => !laneOf(derived, o))) return null;
  const m = derived.metrics;
  const mine = m[lane].p50_ttft_ms;
  const sooner = others.filter((o) => m[o].p50_ttft_ms >= mine);
  if (m[lane].pd && m[lane].pd.transfers > 0 && !sooner.length) return { holds: true };
  const extra = m[lane].pd ? m[lane].pd.mean_transfer_ms + m[lane].pd.mean_decode_queue_ms + m[lane].pd.mean_first_decode_ms : 0;
  return { holds: false, text: `yet on this run its TTFT p50 (${ms(mine)}) was no later than ${
    sooner.map((o) => `${o}'s (${ms(m[o].p50_ttft_ms)})`).join(" and ")}, though the copy, the decode queue and the first`
    + ` decode step added ${ms(extra)} on average: its prefill steps ran quicker than theirs (${why(derived, [lane, ...sooner])})` };
}
