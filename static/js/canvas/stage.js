/**
 * The stage around the canvas: sizing the canvas for the device pixel ratio, what the pointer is over
 * (up to the playhead), where the cell tooltip and the zoom band sit, and presenter mode's height
 * budget — the canvas height that leaves the narration and the playback controls on one screen. Reads
 * the DOM and the layout; writes only the style of the nodes it is given.
 */
import { hitTest, markX, timeX } from "./layout.js";
import { cellAt } from "./renderer.js";

/** Size the canvas for `layout` at this device pixel ratio; returns the size key (the same key: nothing done). */
export function sizeCanvas(canvas, layout, sizeKey) {
  const dpr = window.devicePixelRatio || 1;
  const size = `${layout.width}x${layout.height}@${dpr}`;
  if (size === sizeKey) return size;
  canvas.style.width = `${layout.width}px`;
  canvas.style.height = `${layout.height}px`;
  canvas.width = Math.round(layout.width * dpr);
  canvas.height = Math.round(layout.height * dpr);
  canvas.getContext("2d").setTransform(dpr, 0, 0, dpr, 0, 0);
  return size;
}

/** What the pointer (`point`, canvas px) is over, up to the playhead: {lane, hit, focus} for a cell, a wait or arrival marks; or null. */
export function hovered(layout, scene, point) {
  if (!point) return null;
  const hit = hitTest(layout, point.x, point.y);
  const lane = hit && scene.lanes.find((l) => l.name === hit.lane);
  if (!lane || point.x > timeX(layout, scene.t)) return null;
  if (hit.kind === "mark") {
    const marks = hit.marks.filter((m) => markX(layout, m) <= timeX(layout, scene.t));
    return marks.length ? { lane, hit: { ...hit, marks }, focus: marks.length === 1 ? marks[0].id : null } : null;
  }
  if (hit.kind === "split") return hit.step <= lane.revealed ? { lane, hit, focus: null } : null;
  if (hit.kind === "gap") return hit.gap.step <= lane.records.length ? { lane, hit, focus: null } : null;
  if (hit.step > lane.revealed) return null;
  const what = cellAt(lane, scene.view, hit.step, hit.row);
  return what ? { lane, hit: { ...hit, what }, focus: what.request } : null;
}

/** Put the tooltip beside the pointer, inside the canvas (it clips): below it, or above it near the bottom. */
export function placeTooltip(node, point, layout) {
  node.style.left = `${Math.max(0, Math.min(point.x + 14, layout.width - 260))}px`;
  const below = point.y + 16;
  const h = node.offsetHeight;
  node.style.top = `${below + h > layout.height ? Math.max(0, point.y - h - 10) : below}px`;
}

/** The band a drag along the axis selects ({x0, x1} canvas px), over the whole canvas height; hidden without one. */
export function placeZoomBand(node, drag, layout) {
  node.hidden = !drag;
  if (!drag) return;
  const x = Math.max(layout.axis.x, Math.min(drag.x0, drag.x1));
  const right = Math.min(layout.axis.x + layout.axis.w, Math.max(drag.x0, drag.x1));
  Object.assign(node.style, { left: `${x}px`, width: `${Math.max(0, right - x)}px`, top: "0px", height: `${layout.height}px` });
}

/**
 * Presenter mode's height budget for the canvas: the viewport's height less everything above the canvas and
 * everything below it down to the bottom of the page (the playback controls, the stage's padding). Neither depends
 * on the canvas's own height, so the budget is stable frame to frame.
 */
export function presenterBudget(wrap, stage) {
  const top = wrap.getBoundingClientRect().top + window.scrollY;
  const below = stage.getBoundingClientRect().bottom - wrap.getBoundingClientRect().bottom;
  const main = stage.parentElement;
  const pad = parseFloat(getComputedStyle(main).paddingBottom) || 0;
  return Math.max(220, Math.floor(window.innerHeight - top - below - pad - 4));
}
