/**
 * The pipeline-bubbles lesson's claim (preset pipeline-bubbles, docs/parallelism.md): more micro-batches leave less
 * of each stage idle, measured from the lanes' stage x time grids (core/pipeline.js meanBubble). Returns null while a
 * lane it names still runs, {holds: true} where the run bears it out, else {holds: false, text} with the run's own
 * measured fractions beside the formula's. A pure function of a derived run (canvas/scene.js).
 */
import { meanBubble } from "../core/pipeline.js";

const pct = (v) => `${Math.round(v * 100)}%`;

/** `lane`'s mean measured bubble fraction is below each of `others`'. */
export function fewerBubbles(derived, { lane, others }, laneOf) {
  const lanes = [lane, ...others].map((name) => laneOf(derived, name));
  if (lanes.some((l) => !l)) return null;
  const [mine, ...theirs] = lanes.map((l) => meanBubble(l.records));
  if (!mine || theirs.some((t) => !t)) return null;
  const level = others.filter((_, i) => theirs[i].fraction <= mine.fraction);
  if (!level.length) return { holds: true };
  return { holds: false, text: `yet on this run its stages idled ${pct(mine.fraction)} of each step (formula ${
    pct(mine.formula)}), no less than ${level.map((o) => `${o}'s ${pct(theirs[others.indexOf(o)].fraction)}`).join(" and ")}` };
}
