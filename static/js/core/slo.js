/**
 * Service-level objectives on the page, the twin of engine/workload/slo.py: a TTFT and a TPOT target in ms (the
 * workload's `slo`, or the teacher's own), whether one request met them, and a lane's figures (slo_met,
 * request_goodput, slo_attainment) from its requests' metrics — the same arithmetic, held to the same answers by
 * tests/js/core/slo.test.mjs and tests/golden. Also where a request's TTFT deadline falls on a lane's clock, for the
 * canvas. Pure; knows nothing of the DOM.
 */

export const MAX_TARGET_MS = 3_600_000;  // engine/workload/slo.py MAX_TARGET_MS
const TARGETS = ["ttft_ms", "tpot_ms"];

/**
 * A target object checked as the engine checks it: {slo: {ttft_ms?, tpot_ms?}} or {error: {field, message}}. `raw`
 * null or undefined: {slo: null} (no SLO). The control reads its fields through it, so it refuses what the server would.
 */
export function checkSlo(raw) {
  if (raw === null || raw === undefined) return { slo: null };
  if (typeof raw !== "object" || Array.isArray(raw)) return { error: { field: "slo", message: "must be an object like {\"ttft_ms\": 1500, \"tpot_ms\": 120}" } };
  const unknown = Object.keys(raw).filter((k) => !TARGETS.includes(k)).sort();
  if (unknown.length) return { error: { field: `slo.${unknown[0]}`, message: "is not a target: use ttft_ms and tpot_ms (milliseconds)" } };
  const slo = {};
  for (const key of TARGETS) {
    const v = raw[key];
    if (v === null || v === undefined) continue;
    if (typeof v !== "number" || !Number.isFinite(v)) return { error: { field: `slo.${key}`, message: `must be a number of milliseconds, got ${JSON.stringify(v)}` } };
    if (!(v > 0 && v <= MAX_TARGET_MS)) return { error: { field: `slo.${key}`, message: `must be more than 0 and at most ${MAX_TARGET_MS} ms, got ${v}` } };
    slo[key] = v;
  }
  if (!Object.keys(slo).length) return { error: { field: "slo", message: "give ttft_ms, tpot_ms or both (a target in milliseconds)" } };
  return { slo };
}

/** The targets in words: "TTFT ≤ 700 ms · TPOT ≤ 150 ms". */
export function sloWords(slo) {
  return TARGETS.filter((k) => slo[k] !== null && slo[k] !== undefined)
    .map((k) => `${k.slice(0, 4).toUpperCase()} \u2264 ${slo[k]} ms`).join(" \u00b7 ");
}

const has = (v) => v !== null && v !== undefined;

/** The targets a returned request missed (["ttft"], ["tpot"], both or none), from its metrics' ttft_ms and tpot_ms. */
export function sloMisses(q, slo) {
  const missed = [];
  if (has(slo.ttft_ms) && has(q.ttft_ms) && q.ttft_ms > slo.ttft_ms) missed.push("ttft");
  if (has(slo.tpot_ms) && has(q.tpot_ms) && q.tpot_ms > slo.tpot_ms) missed.push("tpot");
  return missed;
}

/** Whether a request met every target; null while it has not been returned (its times are not final). */
export function meetsSlo(q, slo) {
  if (q.return_step === null || q.return_step === undefined) return null;
  return sloMisses(q, slo).length === 0;
}

/** A lane's SLO figures from its requests' metrics (engine/workload/slo.py slo_figures); all null without an SLO. */
export function sloFigures(requests, wallS, slo) {
  if (!slo) return { slo_met: null, request_goodput: null, slo_attainment: null };
  const verdicts = requests.map((q) => meetsSlo(q, slo)).filter((v) => v !== null);
  const met = verdicts.filter(Boolean).length;
  return { slo_met: met, request_goodput: wallS > 0 ? met / wallS : null,
    slo_attainment: verdicts.length ? met / verdicts.length : null };
}

/** Metrics `m` (a lane's, or up to the playhead) with their SLO figures under `slo` instead of the workload's. */
export function withSlo(m, slo) {
  return { ...m, ...sloFigures(Object.values(m.requests || {}), m.wall_s, slo) };
}

/**
 * Where a TTFT deadline (ms on the lane clock) falls on the step clock: the steps before it plus the share of the
 * step it falls in (a deadline past the last step continues at the last step's pace; in a gap, the next step's start).
 * `starts`/`ends`: the lane's steps (timeline.js).
 */
export function stepPosition(ms, starts, ends) {
  const n = ends.length;
  if (!n) return 0;
  for (let i = 0; i < n; i += 1) {
    if (ms < starts[i]) return i;
    if (ms <= ends[i]) return i + (ends[i] > starts[i] ? (ms - starts[i]) / (ends[i] - starts[i]) : 1);
  }
  const last = ends[n - 1] - starts[n - 1];
  return n + (last > 0 ? (ms - ends[n - 1]) / last : 0);
}

/**
 * Each returned request's SLO verdict on a lane (`requests`: its metrics' requests, keyed by id): id -> {ttft_ms,
 * tpot_ms, first_token_step, finish_step, misses}. A request not yet returned has none. What the canvas marks and
 * the tooltip says.
 */
export function sloVerdicts(requests, slo) {
  const out = new Map();
  if (!slo) return out;
  for (const [id, q] of Object.entries(requests || {})) {
    if (meetsSlo(q, slo) === null) continue;
    out.set(id, { ttft_ms: q.ttft_ms, tpot_ms: q.tpot_ms, first_token_step: q.first_token_step,
      finish_step: q.finish_step, misses: sloMisses(q, slo) });
  }
  return out;
}

/** A request's verdict in words: "SLO met: TTFT 320 ms ≤ 500 · TPOT 62 ms ≤ 150", or "SLO missed: TTFT 782 ms > 700 …". */
export function sloLine(v, slo) {
  const parts = [];
  for (const [key, name, miss] of [["ttft_ms", "TTFT", "ttft"], ["tpot_ms", "TPOT", "tpot"]]) {
    if (!has(slo[key])) continue;
    if (!has(v[key])) parts.push(`${name} none (one token)`);
    else parts.push(`${name} ${Math.round(v[key])} ms ${v.misses.includes(miss) ? ">" : "\u2264"} ${slo[key]}`);
  }
  return `SLO ${v.misses.length ? "missed" : "met"}: ${parts.join(" \u00b7 ")}`;
}
