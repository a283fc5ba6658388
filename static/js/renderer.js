/**
 * Draws a frame: `draw(ctx, scene, layout)` paints the time axis, every lane's grid up to the
 * playhead (with its waits for arrivals and the arrival marks), the KV memory bars, the shared
 * playhead and the legend. It reads the scene and the layout and changes neither. How one cell looks
 * and the palette live in cells.js, the legend in legend.js.
 */
import { FONT, PALETTE, drawCell, drawFocus, drawMark, drawWaiting, fitText } from "./cells.js";
import { axisTicks, cellRect, columnRect, gapRect, markX, stepSpan, timeX } from "./layout.js";
import { drawLegend } from "./legend.js";
import { Phase } from "./vocab.js";

export { PALETTE };

/** What a lane's cell (step, row) shows: {kind, info, request} or null (nothing to draw). */
export function cellAt(lane, view, step, row) {
  const record = lane.records[step - 1];
  if (!record) return null;
  if (view === "slots") {
    const cell = record.slots[row];
    if (!cell) return null;
    return { kind: cell.state, request: cell.request, cell, record,
      info: { label: cell.request, prefill: cell.prefill, chunked: lane.timeline.chunked.has(cell.request), stop: cell.stop } };
  }
  const id = lane.timeline.ids[row];
  const phase = lane.timeline.phases.get(id)[step - 1];
  if (!phase || phase === Phase.DONE) return phase ? { kind: phase, request: id, cell: null, record, info: {} } : null;
  const slot = lane.timeline.slotOf.get(id)[step - 1];
  const cell = slot === null ? null : record.slots[slot];
  return { kind: phase, request: id, cell, record, slot,
    info: { label: id, prefill: cell && cell.prefill, chunked: lane.timeline.chunked.has(id), stop: cell && cell.stop } };
}

function drawAxis(ctx, layout, scene) {
  ctx.font = `11px ${FONT}`;
  ctx.fillStyle = PALETTE.muted;
  ctx.textBaseline = "middle";
  ctx.textAlign = "right";
  ctx.fillText(scene.clock === "steps" ? "step" : "time", layout.axis.x - 8, layout.axis.h / 2);
  ctx.textAlign = "center";
  for (const tick of axisTicks(layout)) {
    if (tick.value === 0) continue;
    const x = scene.clock === "steps" ? tick.x - layout.pxPerUnit / 2 : tick.x;
    ctx.fillText(tick.label, x, layout.axis.h / 2);
  }
}

/** One step's cells; a step that computed nothing is one waiting column (queued requests still outlined). */
function drawStep(ctx, layout, lane, data, scene, s) {
  const waits = data.timeline.waits.has(s);
  if (waits) drawWaiting(ctx, columnRect(layout, lane, s), "waiting");
  for (let row = 0; row < lane.rows.length; row += 1) {
    const what = cellAt(data, scene.view, s, row);
    if (!what) continue;
    const rect = cellRect(layout, lane, s, row);
    if (!waits) drawCell(ctx, rect, what.kind, what.info);
    else if (what.kind === Phase.QUEUED) drawCell(ctx, rect, what.kind, { ...what.info, outline: true });
    if (scene.focus && what.request === scene.focus && what.kind !== Phase.DONE) drawFocus(ctx, rect, what.kind);
  }
  const point = data.timeline.kv[s - 1];
  const frac = point.total > 0 ? Math.min(1, Math.max(0, point.used / point.total)) : 0;
  const [x0, x1] = stepSpan(layout, lane, s);
  ctx.fillStyle = PALETTE.kv;
  ctx.fillRect(x0, lane.kv.y + lane.kv.h * (1 - frac), Math.max(1, x1 - x0 - 1), lane.kv.h * frac);
}

function drawLane(ctx, layout, lane, scene) {
  const { grid, kv, marks } = lane;
  const data = scene.lanes.find((l) => l.name === lane.name);
  ctx.textBaseline = "middle";
  ctx.fillStyle = PALETTE.muted;
  ctx.textAlign = "right";
  ctx.font = `11px ${FONT}`;
  lane.rows.forEach((label, row) => {
    const text = fitText(ctx, [label, `${label.slice(0, 10)}\u2026`], layout.axis.x - 14) || "";
    ctx.fillText(text, grid.x - 8, grid.y + row * lane.rowH + lane.rowH / 2);
  });
  ctx.fillText(data.kvLabel, grid.x - 8, kv.y + kv.h / 2);
  if (marks.h) {
    ctx.font = `10px ${FONT}`;
    ctx.fillText("arrivals", grid.x - 8, marks.y + marks.h / 2);
  }
  ctx.fillStyle = PALETTE.kvTrack;
  ctx.fillRect(kv.x, kv.y, kv.w, kv.h);
  // Everything the playhead has reached, clipped at the playhead so a step appears as it is swept.
  const xPlay = timeX(layout, scene.t);
  const steps = Math.min(data.records.length, data.revealed);
  ctx.save();
  ctx.beginPath();
  ctx.rect(grid.x, marks.y, Math.max(0, xPlay - grid.x), kv.y + kv.h - marks.y);
  ctx.clip();
  for (const gap of data.timeline.gaps) {
    const rect = gap.step <= data.records.length && gapRect(layout, lane, gap);
    if (rect) drawWaiting(ctx, rect);
  }
  for (let s = 1; s <= steps; s += 1) drawStep(ctx, layout, lane, data, scene, s);
  if (marks.h) for (const a of data.timeline.arrivals) drawMark(ctx, markX(layout, a), marks);
  ctx.restore();
  ctx.strokeStyle = PALETTE.kvBudget;
  ctx.setLineDash([4, 3]);
  ctx.beginPath();
  ctx.moveTo(kv.x, kv.y + 0.5);
  ctx.lineTo(kv.x + kv.w, kv.y + 0.5);
  ctx.stroke();
  ctx.setLineDash([]);
}

/** A lane's title and caption, on a background of their own so the playhead passes behind them; shortened to fit. */
function drawTitle(ctx, layout, lane, scene) {
  const { grid, title } = lane;
  const data = scene.lanes.find((l) => l.name === lane.name);
  const y = title.y + title.h / 2;
  const room = layout.width - grid.x - 4;
  ctx.textBaseline = "middle";
  ctx.textAlign = "left";
  ctx.font = `600 14px ${FONT}`;
  const name = fitText(ctx, [data.title, data.title.split(" \u2014 ")[0]], room) || data.name;
  const nameW = ctx.measureText(name).width;
  ctx.font = `12px ${FONT}`;
  const parts = data.caption.split(" \u00b7 ");
  const options = parts.map((_, i) => parts.slice(0, parts.length - i).join(" \u00b7 "));
  const caption = fitText(ctx, options, room - nameW - 12) || "";
  const width = nameW + (caption ? 12 + ctx.measureText(caption).width : 0);
  ctx.fillStyle = PALETTE.background;
  ctx.fillRect(grid.x - 2, title.y + 4, width + 8, title.h - 8);
  ctx.fillStyle = PALETTE.muted;
  ctx.fillText(caption, grid.x + nameW + 12, y);
  ctx.font = `600 14px ${FONT}`;
  ctx.fillStyle = PALETTE.text;
  ctx.fillText(name, grid.x, y);
}

export function draw(ctx, scene, layout) {
  ctx.fillStyle = PALETTE.background;
  ctx.fillRect(0, 0, layout.width, layout.height);
  drawAxis(ctx, layout, scene);
  for (const lane of layout.lanes) drawLane(ctx, layout, lane, scene);
  if (layout.lanes.length) {
    const x = Math.round(timeX(layout, scene.t)) + 0.5;
    const last = layout.lanes[layout.lanes.length - 1];
    ctx.strokeStyle = PALETTE.playhead;
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.moveTo(x, layout.axis.h - 2);
    ctx.lineTo(x, last.kv.y + last.kv.h + 4);
    ctx.stroke();
    ctx.lineWidth = 1;
    ctx.fillStyle = PALETTE.playhead;
    ctx.beginPath();
    ctx.moveTo(x - 5, layout.axis.h - 8);
    ctx.lineTo(x + 5, layout.axis.h - 8);
    ctx.lineTo(x, layout.axis.h - 2);
    ctx.fill();
  }
  for (const lane of layout.lanes) drawTitle(ctx, layout, lane, scene);
  drawLegend(ctx, layout, scene);
}
