// core/pipeline.js: the stage x time grid the page draws under a pipeline-parallel lane. The record below is one the
// engine wrote (tiny model, PP=2, m=2, a decode step of 2 rows; engine/worker/pipeline_parallel.py pipeline_figures):
// the page's measured bubble must be the engine's, and the grid at a step the last record at or before it with one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { bubbleLine, bubbleOf, hasPipeline, meanBubble, pipelineAt } from "../../../static/js/core/pipeline.js";

const RECORD = { step: 2, forward: "decode", micro_batches: [2], bubble_fraction: 0.6553, bubble_formula: 0.3333,
  stage_grid: [[[0, 0, 1.327, 14.037], [0, 1, 14.536, 15.945]], [[0, 0, 22.233, 34.286], [0, 1, 43.179, 51.805]]] };

test("the page measures a step's bubble as the engine did: idle stage-time over the span, every stage", () => {
  const { fraction, from, to } = bubbleOf(RECORD.stage_grid);
  assert.equal(Number(fraction.toFixed(4)), RECORD.bubble_fraction);
  assert.deepEqual([from, to], [1.327, 51.805]);
});

test("the grid at the playhead is the last step at or before it that ran through the stages", () => {
  const idle = { step: 3, forward: "none" };
  const records = [{ ...RECORD, step: 1, bubble_fraction: 0.5 }, RECORD, idle];
  assert.ok(hasPipeline(records) && !hasPipeline([idle]));
  assert.equal(pipelineAt(records, 3).step, 2);
  assert.equal(pipelineAt(records, 1).fraction, 0.5);
  assert.equal(pipelineAt([idle], 1), null);
  const at = pipelineAt(records, 2);
  assert.deepEqual(at.stages[1][1], { call: 0, mb: 1, start: 43.179, end: 51.805 });
  assert.equal(bubbleLine(at, 2), "step 2: bubble measured 66% \u00b7 formula (p\u22121)/(m+p\u22121) = 33% (p = 2, m = 2)");
  assert.deepEqual(meanBubble(records), { fraction: (0.5 + 0.6553) / 2, formula: 0.3333, steps: 2 });
});
