/**
 * Draws a frame: `draw(ctx, scene, layout)` paints the time axis, every lane's grid up to the
 * playhead (with its waits for arrivals, the arrival marks and a flag at each preemption), the KV
 * memory bars with their budget line labelled, the shared playhead and the legend, in the layout's
 * type scale (presenter mode draws larger, and never a cell label under 14 px or a KV label under 12)
 * and over the part of the run the axis shows (a zoom). It reads the scene and the layout and changes
 * neither; it returns the text it wrote, each with its font size (ink.js), for the probe. How one cell looks and the palette live in
 * cells.js, the legend in legend.js.
 */
import { FONT, PALETTE, drawCell, drawDeadline, drawFlag, drawFocus, drawLoad, drawMark, drawSloMiss, drawTransfer, drawWaiting,
  fitText } from "./cells.js";
import { noting } from "./ink.js";
import { handoffLines, transferBand } from "./pdlanes.js";
import { PRESENT_MIN, TYPE, axisTicks, cellRect, columnRect, flagRects, flagText, gapRect, markX, stepSpan, timeX } from "./layout.js";
import { drawLegend } from "./legend.js";
import { drawPlacement, drawSplit } from "./tplanes.js";
import { placementLine } from "../core/tpsplit.js";
import { stepPosition } from "../core/slo.js";
import { Phase } from "../core/vocab.js";

export { PALETTE };

const typeOf = (layout) => layout.type || TYPE.normal;

/** What a lane's cell (step, row) shows: {kind, info, request} or null (nothing to draw). */
export function cellAt(lane, view, step, row) {
  const record = lane.records[step - 1];
  if (!record) return null;
  if (view === "slots") {
    const cell = record.slots[row];
    if (!cell) return null;
    return { kind: cell.state, request: cell.request, cell, record,
      info: { label: cell.request, prefill: cell.prefill, chunked: lane.timeline.chunked.has(cell.request), stop: cell.stop,
        cached: cell.cached, written: cell.tokens ? cell.tokens.length : 1 } };
  }
  const id = lane.timeline.ids[row];
  const phase = lane.timeline.phases.get(id)[step - 1];
  if (!phase || phase === Phase.DONE) return phase ? { kind: phase, request: id, cell: null, record, info: {} } : null;
  const slot = lane.timeline.slotOf.get(id)[step - 1];
  const cell = slot === null ? null : record.slots[slot];
  return { kind: phase, request: id, cell, record, slot,
    info: { label: id, prefill: cell && cell.prefill, chunked: lane.timeline.chunked.has(id), stop: cell && cell.stop,
      cached: cell && cell.cached, written: cell && cell.tokens ? cell.tokens.length : 1 } };
}

function drawAxis(ctx, layout, scene) {
  const { axis } = layout;
  ctx.font = `${typeOf(layout).axis}px ${FONT}`;
  ctx.fillStyle = PALETTE.muted;
  ctx.textBaseline = "middle";
  ctx.textAlign = "right";
  ctx.fillText(scene.clock === "steps" ? "step" : "time", axis.x - 8, axis.h / 2);
  ctx.textAlign = "center";
  for (const tick of axisTicks(layout)) {
    const x = scene.clock === "steps" ? tick.x - layout.pxPerUnit / 2 : tick.x;
    if (tick.value === 0 || x < axis.x || x + ctx.measureText(tick.label).width / 2 > layout.width) continue;
    ctx.fillText(tick.label, x, axis.h / 2);
  }
}

/** One step's cells; a step that computed nothing is one waiting column (queued requests still outlined). */
function drawStep(ctx, layout, lane, data, scene, s) {
  const waits = data.timeline.waits.has(s);
  const maxPx = typeOf(layout).cell;
  const minPx = layout.present ? PRESENT_MIN.cellPx : undefined;  // the back of the room: a label this size or none
  if (waits) drawWaiting(ctx, columnRect(layout, lane, s), "waiting", minPx);
  for (let row = 0; row < lane.rows.length; row += 1) {
    const what = cellAt(data, scene.view, s, row);
    if (!what) continue;
    const rect = cellRect(layout, lane, s, row);
    if (!waits) drawCell(ctx, rect, what.kind, { ...what.info, maxPx, minPx });
    else if (what.kind === Phase.QUEUED) drawCell(ctx, rect, what.kind, { ...what.info, outline: true });
    if (scene.focus && what.request === scene.focus && what.kind !== Phase.DONE) drawFocus(ctx, rect, what.kind);
  }
  const point = data.timeline.kv[s - 1];
  const frac = point.total > 0 ? Math.min(1, Math.max(0, point.used / point.total)) : 0;
  const [x0, x1] = stepSpan(layout, lane, s);
  ctx.fillStyle = PALETTE.kv;
  ctx.fillRect(x0, lane.kv.y + lane.kv.h * (1 - frac), Math.max(1, x1 - x0 - 1), lane.kv.h * frac);
}

/**
 * A lane's SLO marks as the canvas draws them, up to step `steps`: `deadlines` [{id, x, y, h}], each request's TTFT
 * deadline on its row in the request view (arrival + the TTFT target; on the step clock inside the step whose span
 * holds it), and `misses` [{id, miss ("ttft" | "tpot"), step, x, y, w, h}], the cell where a request missed a target:
 * its first token for TTFT, its last for TPOT (either view). `lane`: the layout's; `data`: the scene's.
 */
export function sloMarks(layout, lane, data, view, steps) {
  const { slo, timeline } = data;
  const deadlines = [];
  const misses = [];
  if (!slo) return { deadlines, misses };
  if (view === "requests" && slo.ttft_ms) {
    for (const a of timeline.arrivals) {
      const row = lane.rows.indexOf(a.id);
      const due = a.arrival_ms + slo.ttft_ms;
      const x = timeX(layout, layout.clock === "steps" ? stepPosition(due, timeline.starts, timeline.ends) : due);
      if (row >= 0) deadlines.push({ id: a.id, x, y: lane.grid.y + row * lane.rowH, h: lane.rowH });
    }
  }
  for (const [id, v] of data.verdicts) {
    for (const miss of v.misses) {
      const step = miss === "ttft" ? v.first_token_step : v.finish_step;
      if (step === null || step > steps) continue;
      const row = view === "requests" ? lane.rows.indexOf(id) : data.records[step - 1].slots.findIndex((c) => c.request === id);
      if (row >= 0) misses.push({ id, miss, step, ...cellRect(layout, lane, step, row) });
    }
  }
  return { deadlines, misses };
}

/** [x0, x1] of a fleet replica's first `steps` steps: where its load bars stand (cells.js loadBars). */
export function loadSpans(layout, lane, steps) {
  return Array.from({ length: steps }, (_, i) => stepSpan(layout, lane, i + 1));
}

function drawSlo(ctx, layout, lane, data, view, steps) {
  const { deadlines, misses } = sloMarks(layout, lane, data, view, steps);
  for (const d of deadlines) drawDeadline(ctx, d.x, d);
  for (const m of misses) drawSloMiss(ctx, m);
}

/**
 * The gutter beside a lane: its row labels, "arrivals", and the KV bar's label. A bar tall enough for two lines
 * labels its dashed top line (the budget, or the lane's whole capacity) and, below, what is in use at the playhead.
 */
function drawGutter(ink, layout, lane, data) {
  const { grid, kv, marks } = lane;
  const type = typeOf(layout);
  let ctx = ink("row");
  ctx.textBaseline = "middle";
  ctx.fillStyle = PALETTE.muted;
  ctx.textAlign = "right";
  ctx.font = `${Math.max(9, Math.min(type.label, lane.rowH))}px ${FONT}`;
  lane.rows.forEach((label, row) => {
    const text = fitText(ctx, [label, `${label.slice(0, 10)}\u2026`, `${label.slice(0, 4)}\u2026`], layout.axis.x - 14) || "";
    ctx.fillText(text, grid.x - 8, grid.y + row * lane.rowH + lane.rowH / 2);
  });
  ctx = ink("kv");
  const px = Math.min(type.label, Math.floor(kv.h / 2));
  const point = data.kvAt || data.timeline.kv[data.timeline.kv.length - 1];
  if (point && px >= (layout.present ? PRESENT_MIN.kvPx : 10)) {
    const unit = point.unit === "blocks" ? "blk" : "tok";
    ctx.font = `600 ${px}px ${FONT}`;
    ctx.fillStyle = PALETTE.kvBudget;
    const line = `${point.unit === "blocks" ? "budget" : "KV cap."} ${point.total} ${unit}`;
    const room = grid.x - 10;  // a phone's narrow gutter: the shorter form
    ctx.fillText(fitText(ctx, [line, `${point.total} ${unit}`], room) || "", grid.x - 8, kv.y + px / 2 + 1);
    ctx.font = `${px}px ${FONT}`;
    ctx.fillStyle = PALETTE.muted;
    const use = data.kvAt ? [`KV in use ${data.kvAt.used}`, `in use ${data.kvAt.used}`, String(data.kvAt.used)] : ["KV memory", "KV"];
    ctx.fillText(fitText(ctx, use, room) || "", grid.x - 8, kv.y + kv.h - px / 2);
  } else {
    ctx.font = `${Math.max(9, Math.min(type.label, kv.h))}px ${FONT}`;
    ctx.fillText(fitText(ctx, [data.kvLabel, "KV"], grid.x - 10) || "", grid.x - 8, kv.y + kv.h / 2);
  }
  if (lane.load && lane.load.h) {  // a fleet replica: its load at the playhead, of the most any replica of the fleet held
    ctx = ink("row");
    ctx.font = `${Math.max(9, type.label - 1)}px ${FONT}`;
    ctx.fillStyle = PALETTE.muted;
    const now = data.revealed > 0 ? data.loads[Math.min(data.revealed, data.loads.length) - 1] : null;
    const words = now === null ? [`load (max ${data.loadMax})`, "load"] : [`load ${now} (max ${data.loadMax})`, `load ${now}`, String(now)];
    ctx.fillText(fitText(ctx, words, grid.x - 10) || "", grid.x - 8, lane.load.y + lane.load.h / 2);
  }
  if (lane.split && lane.split.h) {  // a tensor-parallel lane: its band of compute and all-reduce bars
    ctx = ink("row");
    ctx.font = `${Math.max(9, type.label - 1)}px ${FONT}`;
    ctx.fillStyle = PALETTE.muted;
    ctx.fillText(fitText(ctx, ["compute | all-reduce", "fwd split", "TP"], grid.x - 10) || "", grid.x - 8, lane.split.y + lane.split.h / 2);
  }
  if (marks.h) {
    ctx = ink("row");
    ctx.font = `${Math.max(9, type.label - 1)}px ${FONT}`;
    ctx.fillStyle = PALETTE.muted;
    const word = data && data.pd ? (data.pd.role === "decode" ? "KV in" : "arrivals") : data && data.fleet ? "routed" : "arrivals";
    ctx.fillText(word, grid.x - 8, marks.y + marks.h / 2);
  }
}

function drawLane(ink, layout, lane, scene) {
  const { grid, kv, marks } = lane;
  const data = scene.lanes.find((l) => l.name === lane.name);
  drawGutter(ink, layout, lane, data);
  const ctx = ink("cell");
  ctx.fillStyle = PALETTE.kvTrack;
  ctx.fillRect(kv.x, kv.y, kv.w, kv.h);
  // Everything the playhead has reached, clipped at the playhead (so a step appears as it is swept) and to the grid
  // (a zoom shows part of the run).
  const xPlay = Math.min(grid.x + grid.w, timeX(layout, scene.t));
  const steps = Math.min(data.records.length, data.revealed);
  ctx.save();
  ctx.beginPath();
  ctx.rect(grid.x, marks.y, Math.max(0, xPlay - grid.x), kv.y + kv.h - marks.y);  // (the split band lies between)
  ctx.clip();
  for (const gap of data.timeline.gaps) {  // the part swept so far: its label centres on what is shown, not the whole wait
    const rect = gap.step <= data.records.length && gapRect(layout, lane, gap);
    const x0 = rect && Math.max(rect.x, grid.x);
    if (rect && xPlay > x0) {
      drawWaiting(ctx, { ...rect, x: x0, w: Math.min(rect.x + rect.w, xPlay) - x0 }, undefined,
        layout.present ? PRESENT_MIN.cellPx : undefined);
    }
  }
  for (let s = 1; s <= steps; s += 1) drawStep(ctx, layout, lane, data, scene, s);
  if (lane.load && lane.load.h && data.loads) drawLoad(ctx, lane.load, loadSpans(layout, lane, steps), data.loads, data.loadMax);
  if (lane.split && lane.split.h) drawSplit(ctx, lane.split, loadSpans(layout, lane, steps), data.records);
  if (data.slo) drawSlo(ctx, layout, lane, data, scene.view, steps);
  if (marks.h) {  // a decode engine's marks: its hand-offs, each after the band of its copy (ms clock)
    for (const a of data.timeline.arrivals) {
      if (a.transfer && layout.clock === "ms") drawTransfer(ctx, transferBand((ms) => timeX(layout, ms), marks, a.transfer));
      drawMark(ctx, markX(layout, a), marks, a.transfer ? PALETTE.transfer : a.branch ? PALETTE.route : undefined);
    }
  }
  if (lane.flags && lane.flags.h) {
    for (const p of data.timeline.preemptions) {
      if (p.step <= steps) {
        drawFlag(ink("flag"), flagRects(layout, lane, p), flagText(p), typeOf(layout).flag,
          ...(p.swapped ? [PALETTE.swapped, PALETTE.swappedText] : []));
      }
    }
  }
  ctx.restore();
  ctx.strokeStyle = PALETTE.kvBudget;
  ctx.lineWidth = kv.h >= 20 ? 2 : 1;
  ctx.setLineDash([5, 3]);
  ctx.beginPath();
  ctx.moveTo(kv.x, kv.y + ctx.lineWidth / 2);
  ctx.lineTo(kv.x + kv.w, kv.y + ctx.lineWidth / 2);
  ctx.stroke();
  ctx.setLineDash([]);
  ctx.lineWidth = 1;
}

/** A lane's title and caption, on a background of their own so the playhead passes behind them; shortened to fit. */
function drawTitle(ctx, layout, lane, scene) {
  const { grid, title } = lane;
  const type = typeOf(layout);
  const data = scene.lanes.find((l) => l.name === lane.name);
  const y = title.y + title.h / 2;
  const room = layout.width - grid.x - 4;
  ctx.textBaseline = "middle";
  ctx.textAlign = "left";
  ctx.font = `600 ${type.title}px ${FONT}`;
  const name = fitText(ctx, [data.title, data.title.split(" \u2014 ")[0]], room) || data.name;
  const nameW = ctx.measureText(name).width;
  ctx.font = `${type.caption}px ${FONT}`;
  const parts = data.caption.split(" \u00b7 ");
  const options = parts.map((_, i) => parts.slice(0, parts.length - i).join(" \u00b7 "));
  const caption = fitText(ctx, options, room - nameW - 12) || "";
  const width = nameW + (caption ? 12 + ctx.measureText(caption).width : 0);
  ctx.fillStyle = PALETTE.background;
  ctx.fillRect(grid.x - 2, title.y + 4, width + 8, title.h - 8);
  ctx.fillStyle = PALETTE.muted;
  ctx.fillText(caption, grid.x + nameW + 12, y);
  ctx.font = `600 ${type.title}px ${FONT}`;
  ctx.fillStyle = PALETTE.text;
  ctx.fillText(name, grid.x, y);
  if (lane.note && lane.note.h) drawPlacement(ctx, lane.note, placementLine(data.placement), type.caption - 1, room);
}

/** A P/D lane's hand-offs swept so far: a dashed line from the prefill engine's slots down to the decode engine's mark. */
function drawHandoffs(ctx, layout, scene) {
  const lines = handoffLines(layout.lanes, scene.lanes, (ms) => timeX(layout, ms), scene.t);
  ctx.strokeStyle = PALETTE.transfer;
  ctx.setLineDash([3, 3]);
  for (const { x, y0, y1 } of lines) {
    if (x < layout.axis.x || x > layout.axis.x + layout.axis.w) continue;
    ctx.beginPath();
    ctx.moveTo(x, y0);
    ctx.lineTo(x, y1);
    ctx.stroke();
  }
  ctx.setLineDash([]);
}

/** The shared playhead, when the part of the run on the axis holds it. */
function drawPlayhead(ctx, layout, t) {
  const x = Math.round(timeX(layout, t)) + 0.5;
  if (x < layout.axis.x - 1 || x > layout.axis.x + layout.axis.w + 1) return;
  const last = layout.lanes[layout.lanes.length - 1];
  const h = layout.axis.h;
  ctx.strokeStyle = PALETTE.playhead;
  ctx.lineWidth = 2;
  ctx.beginPath();
  ctx.moveTo(x, h - 2);
  ctx.lineTo(x, last.kv.y + last.kv.h + 4);
  ctx.stroke();
  ctx.lineWidth = 1;
  ctx.fillStyle = PALETTE.playhead;
  ctx.beginPath();
  ctx.moveTo(x - 5, h - 8);
  ctx.lineTo(x + 5, h - 8);
  ctx.lineTo(x, h - 2);
  ctx.fill();
}

/** Draw the frame; returns the text it wrote: [{kind ("axis", "row", "cell", "kv", "flag", "title", "legend"), text, px, x, y}]. */
export function draw(ctx, scene, layout) {
  const labels = [];
  const ink = (kind) => noting(ctx, kind, labels);
  ctx.fillStyle = PALETTE.background;
  ctx.fillRect(0, 0, layout.width, layout.height);
  drawAxis(ink("axis"), layout, scene);
  for (const lane of layout.lanes) drawLane(ink, layout, lane, scene);
  if (layout.clock === "ms") drawHandoffs(ctx, layout, scene);
  if (layout.lanes.length) drawPlayhead(ctx, layout, scene.t);
  for (const lane of layout.lanes) drawTitle(ink("title"), layout, lane, scene);
  drawLegend(ink("legend"), layout, scene);
  return labels;
}
