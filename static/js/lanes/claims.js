/**
 * The claims a preset's lesson makes, checked against the run it describes. A preset declares them (demos/*.json
 * "claims": [{says, check, lane, others, request?}]): `says` a phrase of its description (tests/js/lanes/lessons.test.mjs
 * checks that it is there), `check` one of CHECKS below, over the finished lanes it names: where the run bears it out, the phrase stays; where it does not (a busy machine's
 * noise made continuous finish after dynamic, or a chunk step outlast the whole prompt's step), the phrase is
 * replaced by what happened, with the run's own numbers and its measured noise (noise.js). While a lane it
 * names still runs, the phrase stays as written (what usually happens). Pure functions of a derived run (scene.js).
 */
import { bothEvict, copyCheaper, fillsMoreOfItsBlocks, losesLessToPreemption, runsMoreAtOnce } from "./memlesson.js";
import { laneBlockSize } from "../core/metrics.js";
import { noiseClause, outlierClause } from "./noise.js";
import { decodersNeverStall, firstTokensLaterByCopy } from "./pdlesson.js";
import { tpSlowerHere } from "./tplesson.js";
import { fewerBubbles } from "./pplesson.js";

/** Why, as far as the run can say: its measured noise, and the worst outlier of the lanes named (if any stands out). */
function why(derived, lanes) {
  const outliers = lanes.map((name) => {
    const clause = outlierClause(laneOf(derived, name).records);
    return clause ? `on ${name}, ${clause}` : "";
  }).filter(Boolean);
  return [noiseClause(derived.metrics), ...outliers].join("; ");
}

const s2 = (ms) => `${(ms / 1000).toFixed(2)} s`;
const ms0 = (ms) => `${Math.round(ms)} ms`;

function laneOf(derived, name) {
  const lane = derived.lanes.find((l) => l.name === name);
  return lane && lane.done ? lane : null;
}

function longestStep(lane) {
  let best = null;
  for (const r of lane.records) if (!best || r.ms > best.ms) best = r;
  return best;
}

/** `lane` finishes no later than each of `others`: the lanes' wall times. */
function finishesNoLater(derived, { lane, others }) {
  const m = derived.metrics;
  if (!laneOf(derived, lane) || others.some((o) => !laneOf(derived, o))) return null;
  const mine = m[lane].wall_s;
  const before = others.filter((o) => m[o].wall_s < mine);
  if (!before.length) return { holds: true };
  const them = before.map((o) => `${o} (${s2(m[o].wall_s * 1000)}, ${m[o].steps} steps)`).join(" and ");
  return { holds: false, text: `yet on this run it finished at ${s2(mine * 1000)} (${m[lane].steps} steps), after ${them}`
    + `, not the usual result (${why(derived, [lane, ...before])})` };
}

/** `lane`'s mean TTFT is below each of `others`' ("far": at most half of the lowest of theirs). */
function firstTokensSooner(derived, { lane, others }) {
  const m = derived.metrics;
  if (!laneOf(derived, lane) || others.some((o) => !laneOf(derived, o))) return null;
  const mine = m[lane].mean_ttft_ms;
  const best = others.reduce((a, o) => (m[o].mean_ttft_ms < m[a].mean_ttft_ms ? o : a), others[0]);
  const theirs = m[best].mean_ttft_ms;
  if (mine <= theirs / 2) return { holds: true };
  if (mine < theirs) {
    return { holds: false, text: `and its first tokens come sooner (mean TTFT ${ms0(mine)}, ${best} ${ms0(theirs)})` };
  }
  return { holds: false, text: `yet on this run its mean TTFT (${ms0(mine)}) was no better than ${best}'s (${ms0(theirs)})`
    + `, not the usual result (${why(derived, [lane, best])})` };
}

/** The step of `lane` that read request `id`'s whole prompt: the one with its last prefill cell. */
function wholePromptStep(lane, id) {
  return lane.records.find((r) => r.slots.some((c) => c.request === id && c.prefill && c.prefill[0] === c.prefill[1])) || null;
}

/** No step of `lane` (chunked) lasts as long as the step of `others[0]` that read `request`'s whole prompt at once. */
function noLongStall(derived, { lane, others, request }) {
  const whole = others[0];
  const a = laneOf(derived, lane);
  const b = laneOf(derived, whole);
  const theirs = b && wholePromptStep(b, request);
  if (!a || !a.records.length || !theirs) return null;
  const mine = longestStep(a);
  if (mine.ms < theirs.ms) return { holds: true };
  return { holds: false, text: `yet on this run one of its steps (step ${mine.step}, ${ms0(mine.ms)}) took as long as`
    + ` ${whole}'s whole-prompt step (step ${theirs.step}, ${ms0(theirs.ms)}), not the usual result`
    + ` (${why(derived, [lane, whole])})` };
}

/** Request `request`'s TTFT is later on `lane` (chunked) than on `others[0]`. */
function firstTokenLater(derived, { lane, others, request }) {
  const whole = others[0];
  if (!laneOf(derived, lane) || !laneOf(derived, whole)) return null;
  const q = (name) => (derived.metrics[name].requests[request] || {}).ttft_ms;
  const [mine, theirs] = [q(lane), q(whole)];
  if (typeof mine !== "number" || typeof theirs !== "number") return null;
  if (mine > theirs) return { holds: true };
  return { holds: false, text: `but ${request}'s own first token came no later on this run (${ms0(mine)}, against`
    + ` ${ms0(theirs)} on ${whole}: ${why(derived, [lane, whole])})` };
}

/** `lane` (a fleet) took a larger share of its prompt tokens from the hits on offer than each of `others`. */
function achievesMoreHits(derived, { lane, others }) {
  const m = derived.metrics;
  if (!laneOf(derived, lane) || others.some((o) => !laneOf(derived, o))) return null;
  const pct = (v) => `${Math.round((v || 0) * 100)}%`;
  const mine = m[lane].prefix_hit_rate_achieved;
  const better = others.filter((o) => m[o].prefix_hit_rate_achieved >= mine);
  if (!better.length) return { holds: true };
  return { holds: false, text: `yet on this run it took ${pct(mine)}, no more than ${better.map((o) =>
    `${o} (${pct(m[o].prefix_hit_rate_achieved)})`).join(" and ")}, not the usual result` };
}

/** `lane` (a fleet) kept its replicas' loads closer than each of `others`: a lower mean load imbalance. */
function balancesLoad(derived, { lane, others }) {
  const m = derived.metrics;
  if (!laneOf(derived, lane) || others.some((o) => !laneOf(derived, o))) return null;
  const mine = m[lane].mean_load_imbalance;
  const level = others.filter((o) => m[o].mean_load_imbalance <= mine);
  if (!level.length) return { holds: true };
  return { holds: false, text: `yet on this run its load imbalance (${mine.toFixed(2)} on average) was no lower than ${
    level.map((o) => `${o}'s (${m[o].mean_load_imbalance.toFixed(2)})`).join(" and ")}, not the usual result` };
}

/** `lane`'s mean TTFT is below each of `others`' (no "far": any margin). */
function firstTokensSoonest(derived, { lane, others }) {
  const m = derived.metrics;
  if (!laneOf(derived, lane) || others.some((o) => !laneOf(derived, o))) return null;
  const mine = m[lane].mean_ttft_ms;
  const sooner = others.filter((o) => m[o].mean_ttft_ms <= mine);
  if (!sooner.length) return { holds: true };
  return { holds: false, text: `yet on this run its mean TTFT (${ms0(mine)}) was no better than ${
    sooner.map((o) => `${o}'s (${ms0(m[o].mean_ttft_ms)})`).join(" and ")}, not the usual result (${why(derived, [lane, ...sooner])})` };
}

/** Every kind of claim a preset may declare: check(derived, claim) -> null (not known yet) | {holds, text}. */
export const CHECKS = Object.freeze({
  balances_load: balancesLoad,
  first_tokens_soonest: firstTokensSoonest,
  achieves_more_hits: achievesMoreHits,
  decoders_never_stall: (derived, c) => decodersNeverStall(derived, c, laneOf, why),  // pdlesson.js: the P/D lesson
  first_tokens_later_by_copy: (derived, c) => firstTokensLaterByCopy(derived, c, laneOf, why),
  tp_slower_here: (derived, c) => tpSlowerHere(derived, c, laneOf, why),  // tplesson.js: the tensor-parallel lesson
  finishes_no_later: finishesNoLater,
  fewer_bubbles: (derived, c) => fewerBubbles(derived, c, laneOf),                  // pplesson.js: the pipeline lesson
  first_tokens_sooner: firstTokensSooner,
  no_long_stall: noLongStall,
  first_token_later: firstTokenLater,
  runs_more_at_once: (derived, c) => runsMoreAtOnce(derived, c, laneOf),           // memlesson.js: the memory lessons
  fills_more_of_its_blocks: (derived, c) => fillsMoreOfItsBlocks(derived, c, laneOf),
  both_evict: (derived, c) => bothEvict(derived, c, laneOf),
  copy_cheaper: (derived, c) => copyCheaper(derived, c, laneOf, (l) => laneBlockSize(l.records, derived.run.workload)),
  loses_less_to_preemption: (derived, c) => losesLessToPreemption(derived, c, laneOf,
    (l) => laneBlockSize(l.records, derived.run.workload)),
});

/** The verdicts of `claims` on `derived`: [{says, holds: true | false | null (not known yet), text}]. */
export function checkClaims(claims, derived) {
  return (Array.isArray(claims) ? claims : []).map((c) => {
    const check = CHECKS[c.check];
    const ok = check && typeof c.says === "string" && typeof c.lane === "string" && Array.isArray(c.others) && c.others.length;
    const verdict = ok && derived && derived.lanes ? check(derived, c) : null;
    return { says: c.says, holds: verdict ? verdict.holds : null, text: verdict && !verdict.holds ? verdict.text : c.says };
  });
}

/** What a lesson says in place of a claim the run contradicts, kept short (issue 38: the rewritten lesson grew to nine
 * lines): the claim, then that this run did not bear it out; the numbers, the noise and the step that strayed are in
 * `claimDetails`, one click away. */
export const NOT_THIS_RUN = "\u2014 not on this run (why: below)";

/** `text` with every claim the run contradicts marked, briefly, as not borne out (`NOT_THIS_RUN`). */
export function markClaims(text, claims, derived) {
  let out = String(text);
  for (const c of checkClaims(claims, derived)) if (c.holds === false) out = out.replace(c.says, `${c.says} ${NOT_THIS_RUN}`);
  return out;
}

/** Each contradicted claim with what happened: "“so no step stalls for long”: yet on this run one of its steps (…)". */
export function claimDetails(claims, derived) {
  return checkClaims(claims, derived).filter((c) => c.holds === false).map((c) => `\u201c${c.says}\u201d: ${c.text}.`);
}

/** `text` with every claim the run contradicts rewritten as what happened. */
export function applyClaims(text, claims, derived) {
  let out = String(text);
  for (const c of checkClaims(claims, derived)) if (c.holds === false) out = out.replace(c.says, c.text);
  return out;
}
