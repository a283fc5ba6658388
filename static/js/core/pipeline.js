/**
 * A pipeline-parallel lane's stage x time grid (engine/worker/pipeline_parallel.py; engine/step.py `stage_grid`,
 * `micro_batches`, `bubble_fraction`, `bubble_formula`): what the page draws under the lane for the step at the
 * playhead. `pipelineAt` reads the record; `bubbleOf` measures the idle stage-time from the grid itself, the same
 * sum the engine wrote (tests/js/core/pipeline.test.mjs holds them to each other). Pure functions of step records;
 * knows nothing of the canvas.
 */

/** Whether any record of a lane carries a stage grid (a pipeline-parallel lane). */
export function hasPipeline(records) {
  return records.some((r) => Array.isArray(r.stage_grid));
}

/** The measured bubble of `grid` ([stage][[call, micro-batch, start_ms, end_ms]]): idle stage-time / stage-time over
 * the span from the first micro-batch's start to the last one's end, every stage; with that span. */
export function bubbleOf(grid) {
  const spans = grid.flat();
  if (!spans.length) return { fraction: 0, from: 0, to: 0 };
  const from = Math.min(...spans.map((s) => s[2]));
  const to = Math.max(...spans.map((s) => s[3]));
  const busy = spans.reduce((a, s) => a + s[3] - s[2], 0);
  const fraction = to > from ? Math.max(0, 1 - busy / (grid.length * (to - from))) : 0;
  return { fraction, from, to };
}

/**
 * The grid of the last record at or before `step` (1-based) that computed through the stages, or null: {step,
 * stages: [[{call, mb, start, end}]], microBatches, fraction (the record's measured), formula, from and to (ms of the
 * first micro-batch's start and the last one's end: the span the bubble is measured over)}.
 */
export function pipelineAt(records, step) {
  for (let i = Math.min(step, records.length) - 1; i >= 0; i--) {
    const r = records[i];
    if (!Array.isArray(r.stage_grid)) continue;
    const stages = r.stage_grid.map((stage) => stage.map(([call, mb, start, end]) => ({ call, mb, start, end })));
    return { step: r.step, stages, microBatches: r.micro_batches, fraction: r.bubble_fraction,
      formula: r.bubble_formula, from: bubbleOf(r.stage_grid).from, to: bubbleOf(r.stage_grid).to };
  }
  return null;
}

/** A lane's mean measured bubble fraction and mean formula over its records with a grid (null: none). */
export function meanBubble(records) {
  const piped = records.filter((r) => typeof r.bubble_fraction === "number");
  if (!piped.length) return null;
  const mean = (key) => piped.reduce((a, r) => a + r[key], 0) / piped.length;
  return { fraction: mean("bubble_fraction"), formula: mean("bubble_formula"), steps: piped.length };
}

/** The line beside a grid: the measured fraction beside the formula, in whole percent. */
export function bubbleLine(at, stages) {
  const pct = (v) => `${Math.round(v * 100)}%`;
  const m = at.microBatches.join(" + ");
  return `step ${at.step}: bubble measured ${pct(at.fraction)} \u00b7 formula (p\u22121)/(m+p\u22121) = ${pct(at.formula)}`
    + ` (p = ${stages}, m = ${m})`;
}
