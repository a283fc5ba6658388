/**
 * A preset's lesson with its placeholders filled from the run it describes: `{LONG.prompt_tokens}`
 * (the prompt tokens of request LONG: the total of its first prefill cell in any lane),
 * `{static.longest_step_share}` (the share of lane "static"'s wall time its longest step took),
 * `{8 slots.wall_s}` (that lane's wall time, 2 decimals), `{8 slots.mean_ttft_ms}` (a mean time: whole ms), a
 * fleet's `prefix_hit_rate_*` (a percentage), a lane's `median_step_ms` and a tensor-parallel lane's `allreduce_share`
 * (tplesson.js), a named model's scale figures (`{Llama-3.1-70B.weights_gb_per_device}`, core/tpscale.js: computed
 * from its config, known before the run), or any other number of a lane's metrics.
 * A value not known yet (the lane still runs, or no run of this mix) shows as "…"; a raw `{...}`
 * never shows. A prompt's token count comes from run_started (`run.promptTokens`, what a spectator has from the
 * start), else from the records. Then every claim of the lesson (claims.js) the finished run contradicts is
 * rewritten as what happened. Pure: returns a string, which the page writes with textContent.
 */
import { applyClaims, claimDetails, markClaims } from "./claims.js";
import { memoryValue } from "./memlesson.js";
import { pdValue } from "./pdlesson.js";
import { tpValue } from "./tplesson.js";
import { scaleValue } from "../core/tpscale.js";
import { laneBlockSize } from "../core/metrics.js";

const PLACEHOLDER = /\{([^{}]+)\.([A-Za-z_0-9]+)\}/g;
const UNKNOWN = "\u2026";

function promptTokens(run, lanes, id) {
  const sent = run.promptTokens && run.promptTokens[id];
  if (typeof sent === "number") return String(sent);
  for (const lane of lanes) {
    for (const r of lane.records) {
      const cell = r.slots.find((c) => c.request === id && c.prefill);
      if (cell) return String(cell.prefill[1]);
    }
  }
  return null;
}

function laneValue(lane, m, key, workload) {
  if (!lane.done || !m) return null;
  const memory = memoryValue(lane, m, key, laneBlockSize(lane.records, workload));  // batch size, token use, ms per block
  if (memory !== undefined) return memory;
  const pd = pdValue(m, key);  // {lane.pd_*}: a P/D lane's copies and ITL / TTFT percentiles in whole ms
  if (pd !== undefined) return pd;
  const tp = tpValue(lane, key);  // {lane.median_step_ms}, {lane.allreduce_share}: the tensor-parallel lesson's
  if (tp !== undefined) return tp;
  if (key === "longest_step_share") {
    const longest = Math.max(0, ...lane.records.map((r) => r.ms));
    return m.wall_s > 0 ? `${Math.round((longest / (m.wall_s * 1000)) * 100)}%` : null;
  }
  const v = m[key];
  if (typeof v !== "number") return null;
  if (key.startsWith("prefix_hit_rate_")) return `${Math.round(v * 100)}%`;  // a fleet's hits available / achieved
  if (/^mean_\w+_ms$/.test(key)) return String(Math.round(v));  // a mean time: whole milliseconds
  return Number.isInteger(v) ? String(v) : v.toFixed(2);
}

/**
 * `text` with every placeholder replaced. `derived` ({run, lanes, metrics}, scene.js) fills them only when
 * its run is of the mix named `name`; otherwise, or while unknown, they show "…". `claims`: the preset's (claims.js).
 */
export function fillLesson(text, name, derived, claims = null) {
  const { filled, ours } = fill(text, name, derived);
  return ours && claims ? applyClaims(filled, claims, derived) : filled;
}

/**
 * The lesson as the page shows it (issue 38: at most two lines, one in Present): {text, details}. `text` is the
 * filled lesson with each claim the run contradicts marked briefly (claims.js NOT_THIS_RUN); `details`, for the
 * toggle under it, says for each what happened, with the run's numbers, its measured noise and the step that strayed.
 */
export function lessonParts(text, name, derived, claims = null) {
  const { filled, ours } = fill(text, name, derived);
  if (!ours || !claims) return { text: filled, details: [] };
  return { text: markClaims(filled, claims, derived), details: claimDetails(claims, derived) };
}

function fill(text, name, derived) {
  const run = derived && derived.run;
  const ours = Boolean(run && run.workload && run.workload.name === name);
  const filled = String(text).replace(PLACEHOLDER, (_, subject, key) => {
    if (!ours) return UNKNOWN;
    const lane = derived.lanes.find((l) => l.name === subject);
    const scale = lane ? undefined : scaleValue(subject, key);  // {Llama-3.1-70B.weights_gb_per_device}: core/tpscale.js
    const value = lane ? laneValue(lane, derived.metrics[subject], key, run.workload)
      : scale !== undefined ? scale : key === "prompt_tokens" ? promptTokens(run, derived.lanes, subject) : null;
    return value ?? UNKNOWN;
  });
  const clean = filled.replace(/\{[^}]*(\}|$)/g, UNKNOWN);  // a placeholder cut short (or unknown shape) never shows raw
  return { filled: clean, ours };
}
