/**
 * A tensor-parallel lane's forward split, read from its step records (engine/step.py: compute_ms, allreduce_ms,
 * allreduces, layer_ms per decoder layer, the mean over its ranks) and its first record's `placement` (the machine
 * statement, engine/report/placement.py): the bars the canvas draws per step, the tooltip's lines, the placement line.
 * Pure functions of records; knows nothing of the canvas or the DOM. A lane of one process has none of these fields.
 */

/** Whether a lane's records carry a forward split (a tensor-parallel lane's). */
export function hasSplit(records) {
  return records.some((r) => r.allreduce_ms !== undefined && r.allreduce_ms !== null);
}

/**
 * A step's bar in the band under its cells, on the shared clock: [x0, x1] of step s is its span, and the step lasted
 * `ms`; compute takes compute_ms of it from the left, the all-reduces allreduce_ms after it (what is left: the
 * driver's picking and messages). [{step, kind: "compute" | "allreduce", x, w, ms}]; steps that computed nothing: none.
 */
export function splitBars(spans, records) {
  const bars = [];
  spans.forEach(([x0, x1], i) => {
    const r = records[i];
    if (!r || r.allreduce_ms === undefined || r.allreduce_ms === null || !(r.ms > 0)) return;
    const perMs = (x1 - x0) / r.ms;
    const cw = r.compute_ms * perMs;
    bars.push({ step: i + 1, kind: "compute", x: x0, w: cw, ms: r.compute_ms });
    bars.push({ step: i + 1, kind: "allreduce", x: x0 + cw, w: r.allreduce_ms * perMs, ms: r.allreduce_ms });
  });
  return bars;
}

const ms1 = (v) => `${v.toFixed(1)} ms`;
const LAYERS_A_LINE = 5;

/** The tooltip of a tensor-parallel lane's step `step` (1-based): its split, then each layer's compute + all-reduce. */
export function splitLines(laneName, records, step) {
  const r = records[step - 1];
  if (!r || r.allreduce_ms === undefined || r.allreduce_ms === null) return [`${laneName} \u00b7 step ${step}: no forward split`];
  const other = Math.max(0, r.ms - r.compute_ms - r.allreduce_ms);
  const share = r.compute_ms + r.allreduce_ms > 0 ? Math.round((100 * r.allreduce_ms) / (r.compute_ms + r.allreduce_ms)) : 0;
  const lines = [`${laneName} \u00b7 step ${step} \u00b7 ${r.forward} \u00b7 ${ms1(r.ms)}`,
    `compute ${ms1(r.compute_ms)} \u00b7 all-reduce ${ms1(r.allreduce_ms)} (mean over the ranks: ${share}% of the forward, `
      + `${r.allreduces} all-reduces)`,
    `driver and messages ${ms1(other)}`];
  const layers = r.layer_ms || [];
  if (layers.length) lines.push("per layer, compute + all-reduce ms:");
  for (let i = 0; i < layers.length; i += LAYERS_A_LINE) {
    lines.push(layers.slice(i, i + LAYERS_A_LINE).map(([c, a], k) => `L${i + k} ${c.toFixed(1)}+${a.toFixed(1)}`).join("  "));
  }
  return lines;
}

/** A split lane's machine statement as one line: where it ran, and what carried its data ("" without one). */
export function placementLine(placement) {
  return placement ? `${placement.says} \u00b7 ${placement.transport}` : "";
}
