/**
 * The live lane's canvas: where things sit (`liveLayout`: arrival marks on top, one row per slot, the KV strip,
 * the time axis) and `drawLive(ctx, scene, layout, labels)`, which paints a scene (live/scene.js) with the main
 * page's cells (cells.js: PALETTE, drawCell, drawWaiting, drawMark) on a window of the lane clock whose right
 * edge is now. Grid lines sit on whole 5 s of the lane clock, so they scroll with the cells. Reads its
 * arguments, changes none; never sizes the canvas (stage.js does, once per resize).
 */
import { FONT, PALETTE, drawCell, drawMark, drawWaiting } from "../canvas/cells.js";

const GUTTER = 58;      // row labels, left of the plot
const RIGHT = 10;
const ROW_H = 24;
const GRID_MS = 5000;

/** Every rectangle of the canvas, in CSS pixels, for a canvas `width` wide with `slots` rows `rowH` high. */
export function liveLayout(width, slots, rowH = ROW_H) {
  const w = Math.max(120, width - GUTTER - RIGHT);
  const marks = { x: GUTTER, y: 4, w, h: 12 };
  const plot = { x: GUTTER, y: 20, w, h: slots * rowH };
  const rows = Array.from({ length: slots }, (_, i) => ({ slot: i, y: plot.y + i * rowH, h: rowH }));
  const kv = { x: GUTTER, y: plot.y + plot.h + 8, w, h: 28 };
  const axis = { x: GUTTER, y: kv.y + kv.h + 4, w, h: 16 };
  return { width, height: axis.y + axis.h + 2, marks, plot, rows, kv, axis };
}

/** The x (CSS px) of lane time `t` in a scene's window. */
export function xOf(layout, scene, t) {
  return layout.plot.x + ((t - scene.from) / (scene.to - scene.from)) * layout.plot.w;
}

/** The part of [t0, t1] inside the window, as {x, w} (clamped to the plot so a clipped run keeps its label). */
export function spanX(layout, scene, t0, t1) {
  const x0 = Math.max(layout.plot.x, xOf(layout, scene, t0));
  const x1 = Math.min(layout.plot.x + layout.plot.w, xOf(layout, scene, t1));
  return { x: x0, w: Math.max(0, x1 - x0) };
}

/** The CSS-pixel rectangle of a run (live/scene.js) on the canvas. */
export function runRect(layout, scene, run) {
  const row = layout.rows[run.row];
  return { ...spanX(layout, scene, run.t0, run.t1), y: row.y, h: row.h };
}

/** Lane time `t` as the server's wall clock (HH:MM:SS) when the lane's start is known, else as seconds. */
export function clockText(t, startedAt) {
  if (startedAt === null || startedAt === undefined) return `${Math.round(t / 1000)} s`;
  const d = new Date((startedAt * 1000) + t);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":");
}

function drawGutter(ctx, layout) {
  ctx.fillStyle = PALETTE.muted;
  ctx.font = `11px ${FONT}`;
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  // numbered from 1, as the main page numbers its slots (`row.slot` is the 0-based index the records use)
  for (const row of layout.rows) ctx.fillText(`slot ${row.slot + 1}`, layout.plot.x - 8, row.y + row.h / 2);
  ctx.fillText("KV use", layout.kv.x - 8, layout.kv.y + layout.kv.h / 2);
}

function drawGrid(ctx, scene, layout, startedAt) {
  ctx.font = `11px ${FONT}`;
  ctx.textBaseline = "top";
  ctx.textAlign = "center";
  for (let t = Math.ceil(scene.from / GRID_MS) * GRID_MS; t <= scene.to; t += GRID_MS) {
    if (t < 0) continue;
    const x = Math.round(xOf(layout, scene, t)) + 0.5;
    ctx.fillStyle = PALETTE.rule;
    ctx.fillRect(x - 0.5, layout.plot.y, 1, layout.kv.y + layout.kv.h - layout.plot.y);
    const text = clockText(t, startedAt);
    const half = ctx.measureText(text).width / 2;
    if (x - half < layout.axis.x || x + half > layout.axis.x + layout.axis.w - 30) continue;  // leave room for "now"
    ctx.fillStyle = PALETTE.muted;
    ctx.fillText(text, x, layout.axis.y + 2);
  }
}

/** KV use per step, 0 to the lane's whole capacity (short chats fill little of it), and the newest step's readout. */
function drawKv(ctx, scene, layout) {
  const { kv } = layout;
  ctx.fillStyle = PALETTE.kvTrack;
  ctx.fillRect(kv.x, kv.y, kv.w, kv.h);
  ctx.fillStyle = PALETTE.kv;
  for (const step of scene.kv) {
    const { x, w } = spanX(layout, scene, step.t0, step.t1);
    const h = Math.max(step.frac > 0 ? 2 : 0, step.frac * kv.h);
    if (w > 0 && h > 0) ctx.fillRect(x, kv.y + kv.h - h, Math.max(1, w), h);
  }
  const last = scene.kv[scene.kv.length - 1];
  if (!last) return;
  ctx.fillStyle = PALETTE.kvBudget;
  ctx.font = `11px ${FONT}`;
  ctx.textAlign = "left";
  ctx.textBaseline = "top";
  const text = `${(100 * last.frac).toFixed(1)}% of ${last.capacity.toLocaleString("en")} tokens at the last step`;
  ctx.fillText(text, kv.x + 6, kv.y + 3);
}

/** Paint `scene` in `layout`; `labels`: {startedAt (epoch s of lane time 0, or null), following}. */
export function drawLive(ctx, scene, layout, { startedAt = null, following = true } = {}) {
  ctx.fillStyle = PALETTE.background;
  ctx.fillRect(0, 0, layout.width, layout.height);
  drawGutter(ctx, layout);
  const { plot } = layout;
  ctx.fillStyle = PALETTE.rule;
  for (const row of layout.rows) ctx.fillRect(plot.x, row.y + row.h - 0.5, plot.w, 1);
  drawGrid(ctx, scene, layout, startedAt);
  if (scene.from < 0) {  // lane time before 0: the lane was not open yet
    const { x, w } = spanX(layout, scene, scene.from, Math.min(0, scene.to));
    ctx.fillStyle = PALETTE.muted;
    ctx.font = `12px ${FONT}`;
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    if (w > 200) ctx.fillText("before the live lane opened", x + w / 2, plot.y + plot.h / 2);
  }
  for (const wait of scene.waits) {
    const { x, w } = spanX(layout, scene, wait.t0, wait.t1);
    if (w >= 1) drawWaiting(ctx, { x, y: plot.y, w, h: plot.h }, "idle: waiting for requests");
  }
  for (const run of scene.runs) {
    const rect = runRect(layout, scene, run);
    if (rect.w > 0) drawCell(ctx, rect, run.kind, { label: run.request || "", stop: run.stop, prefill: run.prefill });
  }
  for (const mark of scene.arrivals) drawMark(ctx, xOf(layout, scene, mark.t), layout.marks);
  drawKv(ctx, scene, layout);
  const right = plot.x + plot.w;
  ctx.fillStyle = PALETTE.playhead;
  ctx.fillRect(right - 1, plot.y - 4, 2, layout.kv.y + layout.kv.h - plot.y + 4);
  ctx.font = `600 11px ${FONT}`;
  ctx.textAlign = "right";
  ctx.textBaseline = "top";
  ctx.fillText(following ? "now" : "paused", right, layout.axis.y + 2);
}
