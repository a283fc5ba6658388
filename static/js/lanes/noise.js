/**
 * How noisy this machine's step times were, in words next to the ms figures: each lane's `step_time_spread` (the
 * metric table's; engine/report/metrics.py step_time_spread: how far nine in ten steps of one shape strayed from that
 * shape's median) for the run, and the machine's figure from its warm-up (`model_status.step_noise`). Above
 * NOISY (25%) the page warns: a lane's ms then say as much about the machine as about its policy. A simulated
 * run says it has no noise. `worstStep` names the one step that strayed most from the steps of its shape: a single
 * outlier a percentile hides. Pure: returns strings and a tone, which the page writes with textContent.
 */
import { percentile, stepsByShape } from "../core/metrics.js";

// a spread above this is a warning: two runs of one mix may rank the lanes differently. Chosen from measured runs
// (docs/teaching.md, 2026-12-06): quiet, every preset's largest lane 2-14%; beside another process, 5 of 17 above it
export const NOISY = 0.25;

/** A spread (a share) in words after "varied": "±12%"; from 100% on, "up to 4.2x" (a step cannot be -300% long). */
export function plusMinus(spread) {
  return spread < 1 ? `\u00b1${Math.round(spread * 100)}%` : `up to ${(1 + spread).toFixed(1)}x`;
}

/** The run's spread: the largest of its lanes' (null: no lane has repeated a step shape yet). */
export function runSpread(metrics) {
  const values = Object.values(metrics || {}).map((m) => m && m.step_time_spread).filter((v) => typeof v === "number");
  return values.length ? Math.max(...values) : null;
}

/** Whether every lane of the run is simulated (its step times are a cost model's). */
export function runSimulated(metrics) {
  const lanes = Object.values(metrics || {});
  return lanes.length > 0 && lanes.every((m) => m && m.simulated);
}

/** The page's tagline: its own words, or on a simulated run (every lane simulated) its `data-simulated` ones. */
export function renderTagline(node, metrics) {
  if (!node) return;
  if (node.dataset.real === undefined) node.dataset.real = node.textContent;
  const text = runSimulated(metrics) ? node.dataset.simulated : node.dataset.real;
  if (node.textContent !== text) node.textContent = text;
}

/**
 * The step of `records` that took longest against the median of the steps of its shape (the same forward kind,
 * rows and tokens): {step, ms, median, ratio}, or null when no shape repeats.
 */
export function worstStep(records) {
  let worst = null;
  for (const steps of stepsByShape(records).values()) {
    if (steps.length < 2) continue;
    const median = percentile(steps.map((r) => r.ms), 50);
    for (const r of steps) {
      const ratio = median > 0 ? r.ms / median : 1;
      if (!worst || ratio > worst.ratio) worst = { step: r.step, ms: r.ms, median, ratio };
    }
  }
  return worst;
}

/** "step 6 took 1103 ms, 5.0 x the 221 ms median of the steps that did the same work" ("" when none stands out). */
export function outlierClause(records) {
  const w = worstStep(records || []);
  if (!w || w.ratio < 1 + NOISY) return "";
  return `step ${w.step} took ${Math.round(w.ms)} ms, ${w.ratio.toFixed(1)} x the ${Math.round(w.median)} ms median of`
    + " the steps that did the same work";
}

/** The clause a lesson adds where a claim failed: "step times varied ±18% on this machine during the run". */
export function noiseClause(metrics) {
  const spread = runSpread(metrics);
  return spread === null ? "no step shape repeated, so this run's noise is not measured"
    : `step times varied ${plusMinus(spread)} on this machine during the run`;
}

/**
 * {text, tone} of the noise line: "" with no run; tone "warn" when the run's spread (or, before any shape repeats,
 * the warm-up's) is above NOISY. `warmup`: the machine's warm-up spread (model_status.step_noise) or null.
 */
export function noiseLine(metrics, warmup = null) {
  if (!metrics || !Object.keys(metrics).length) return { text: "", tone: "" };
  if (runSimulated(metrics) && !runSpread(metrics)) {
    return { text: "Simulated run: its step times come from a cost model, so they have no noise.", tone: "" };
  }
  const spread = runSpread(metrics);
  const machine = typeof warmup === "number" ? ` (${plusMinus(warmup)} in the warm-up's repeated steps)` : "";
  const figure = spread ?? (typeof warmup === "number" ? warmup : null);
  const text = spread === null ? `Step-time noise: no step shape has repeated yet${machine}.`
    : `Step times varied ${plusMinus(spread)} on this machine during the run${machine}.`;
  if (figure !== null && figure > NOISY) {
    return { text: `${text} For the lesson: a claim about time (which lane finishes first, how long a wait or a`
      + " first token takes) may fail on this run because of the machine, not the policy; step counts and tokens still"
      + " hold. Run it again, or play the reference run.", tone: "warn" };
  }
  return { text, tone: "" };
}

/** Write the noise line into `node` (textContent and data-tone), only when it changed. */
export function renderNoise(node, metrics, warmup) {
  if (!node) return;
  const { text, tone } = noiseLine(metrics, warmup);
  if (node.textContent !== text) node.textContent = text;
  if (node.dataset.tone !== tone) node.dataset.tone = tone;
}
