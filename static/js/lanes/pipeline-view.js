/**
 * The stage x time grids on the page: under the lanes, for every pipeline-parallel lane, the grid of the step at the
 * playhead (canvas/pipeline-draw.js), where the bubbles show, with the measured fraction beside the formula. Hidden
 * while no lane of the run has a grid. What it drew is on window.__pipeline for the browser tests. Reads the scene
 * (each lane's records and the step the playhead shows); owns only its canvas.
 */
import { drawPipelines, pipelineHeight } from "../canvas/pipeline-draw.js";
import { hasPipeline, pipelineAt } from "../core/pipeline.js";

let sizeKey = "";

/** Draw the grids of `scene`'s pipeline-parallel lanes on `canvas`, `width` CSS px wide; returns whether any shows. */
export function showPipelines(canvas, scene, width) {
  if (!canvas) return false;
  const grids = scene.lanes.filter((l) => hasPipeline(l.records))
    .map((l) => ({ name: l.name, at: pipelineAt(l.records, l.revealed) })).filter((g) => g.at);
  canvas.hidden = !grids.length;
  if (!grids.length) {
    window.__pipeline = { lanes: [] };
    return false;
  }
  const height = pipelineHeight(grids);
  const dpr = window.devicePixelRatio || 1;
  const size = `${width}x${height}@${dpr}`;
  if (size !== sizeKey) {
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    canvas.getContext("2d").setTransform(dpr, 0, 0, dpr, 0, 0);
    sizeKey = size;
  }
  const drawn = drawPipelines(canvas.getContext("2d"), grids, width);
  window.__pipeline = { lanes: drawn.map((d, i) => ({ ...d, fraction: grids[i].at.fraction, formula: grids[i].at.formula })),
    width, height };
  return true;
}
