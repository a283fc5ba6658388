/**
 * Draws a frame: `draw(ctx, scene, layout)` paints the time axis, every lane's grid up to the
 * playhead (with its waits for arrivals and the arrival marks), the KV memory bars, the shared
 * playhead and the legend. It reads the scene and the layout and changes neither. Every cell kind
 * differs by more than colour: prefill carries a "P", padding is hatched, idle is an outline,
 * preempted carries a cross, queued a dashed outline, waiting a dotted tint with a "waiting" label.
 */
import { axisTicks, cellRect, columnRect, gapRect, markX, stepSpan, timeX } from "./layout.js";
import { Phase, SlotState, StopReason } from "./vocab.js";

/** Okabe–Ito based: safe for the common colour-vision deficiencies. */
export const PALETTE = Object.freeze({
  background: "#ffffff",
  text: "#1d2330",
  muted: "#5b6472",
  rule: "#e3e6ea",
  prefill: "#e69f00", prefillText: "#3a2600",
  decode: "#56b4e9", decodeText: "#08263a",
  padding: "#dadde2", hatch: "#7d8590", paddingText: "#4a525e",
  idle: "#ffffff", idleLine: "#b9bfc8",
  preempted: "#d55e00", preemptedText: "#ffffff",
  queued: "#f1f2f4", queuedLine: "#8f97a3",
  waiting: "#f6eaa6", waitingMark: "#8a7400", waitingText: "#4d4100",
  arrival: "#009e73",
  kv: "#cc79a7", kvTrack: "#f4ecf1", kvBudget: "#6b3a57",
  playhead: "#1d2330",
  focus: "#1d2330",
});

const ARRIVAL = "arrival";  // the legend's arrival mark (not a cell kind)
const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";

function fitText(ctx, options, maxW) {
  return options.find((s) => s && ctx.measureText(s).width <= maxW) || null;
}

function hatch(ctx, r) {
  ctx.save();
  ctx.beginPath();
  ctx.rect(r.x, r.y, r.w, r.h);
  ctx.clip();
  ctx.strokeStyle = PALETTE.hatch;
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (let d = -r.h; d < r.w; d += 6) {
    ctx.moveTo(r.x + d, r.y + r.h);
    ctx.lineTo(r.x + d + r.h, r.y);
  }
  ctx.stroke();
  ctx.restore();
}

/** Waiting (the lane computes nothing): a yellow tint with rows of dashes, and "waiting" when it fits. */
function drawWaiting(ctx, rect, text = "waiting for arrivals") {
  const r = { x: rect.x + 1, y: rect.y + 1, w: rect.w - 2, h: rect.h - 2 };
  if (r.w <= 0 || r.h <= 0) return;
  ctx.save();
  ctx.beginPath();
  ctx.rect(r.x, r.y, r.w, r.h);
  ctx.clip();
  ctx.fillStyle = PALETTE.waiting;
  ctx.fillRect(r.x, r.y, r.w, r.h);
  ctx.fillStyle = PALETTE.waitingMark;
  for (let y = r.y + 3, odd = 0; y < r.y + r.h - 1; y += 6, odd ^= 1) {
    for (let x = r.x + (odd ? 5 : 1); x < r.x + r.w; x += 10) ctx.fillRect(x, y, 5, 2);
  }
  ctx.font = `600 12px ${FONT}`;
  const fit = r.h >= 16 && fitText(ctx, text ? [text, "waiting"] : [], r.w - 12);
  if (fit) {
    const w = ctx.measureText(fit).width + 10;
    ctx.fillStyle = PALETTE.waiting;
    ctx.fillRect(r.x + (r.w - w) / 2, r.y + r.h / 2 - 8, w, 16);
    ctx.fillStyle = PALETTE.waitingText;
    label(ctx, fit, r);
  }
  ctx.restore();
}

/** A request's arrival: a small downward triangle above the lane's grid. */
function drawMark(ctx, x, band) {
  ctx.fillStyle = PALETTE.arrival;
  ctx.beginPath();
  ctx.moveTo(x - 4.5, band.y + 1);
  ctx.lineTo(x + 4.5, band.y + 1);
  ctx.lineTo(x, band.y + band.h - 1);
  ctx.fill();
}

function label(ctx, text, r, yFrac = 0.5) {
  ctx.textBaseline = "middle";
  ctx.textAlign = "center";
  ctx.fillText(text, r.x + r.w / 2, r.y + r.h * yFrac + 0.5);
}

/** Prefill: a "P" with the request id, and for a chunked prompt how much of it is cached ("P 96/160"). */
function drawPrefill(ctx, r, id, info) {
  ctx.fillStyle = PALETTE.prefill;
  ctx.fillRect(r.x, r.y, r.w, r.h);
  ctx.fillStyle = PALETTE.prefillText;
  const part = info.prefill && info.chunked ? `${info.prefill[0]}/${info.prefill[1]}` : null;
  const oneLine = part ? [`P ${part} ${id}`, `P ${part}`] : [`P ${id}`, "P"];
  const text = fitText(ctx, oneLine, r.w - 4);
  if (text) return label(ctx, text, r);
  const top = fitText(ctx, [`P ${id}`, "P"], r.w - 4);
  if (part && top && r.h >= 22) {  // "P R3" over "96/160" when one line is too narrow
    label(ctx, top, r, 0.3);
    for (const px of [10, 9, 8]) {  // the fraction in the largest font that fits, else the cached count alone
      ctx.font = `${Math.min(px, r.h / 2 - 2)}px ${FONT}`;
      const bottom = fitText(ctx, [part, px === 8 ? String(info.prefill[0]) : null], r.w - 2);
      if (bottom) return label(ctx, bottom, r, 0.72);
    }
    return undefined;
  }
  if (top) return label(ctx, top, r);
  ctx.beginPath();  // too small for a letter: a corner notch still marks it
  ctx.moveTo(r.x, r.y);
  ctx.lineTo(r.x + Math.min(r.w, 6), r.y);
  ctx.lineTo(r.x, r.y + Math.min(r.h, 6));
  ctx.fill();
  return undefined;
}

/** One cell. kind: a Phase; info: {label, prefill: [cached, total] | null, chunked, stop}. */
function drawCell(ctx, rect, kind, info = {}) {
  const r = { x: rect.x + 1, y: rect.y + 1, w: Math.max(1, rect.w - 2), h: Math.max(1, rect.h - 2) };
  const id = info.label || "";
  ctx.font = `600 ${Math.min(12, Math.max(9, r.h - 8))}px ${FONT}`;
  if (kind === Phase.PREFILL) {
    drawPrefill(ctx, r, id, info);
  } else if (kind === Phase.DECODE) {
    ctx.fillStyle = PALETTE.decode;
    ctx.fillRect(r.x, r.y, r.w, r.h);
    ctx.fillStyle = PALETTE.decodeText;
    const text = fitText(ctx, [id], r.w - 4);
    if (text) label(ctx, text, r);
  } else if (kind === Phase.PADDING) {
    ctx.fillStyle = PALETTE.padding;
    ctx.fillRect(r.x, r.y, r.w, r.h);
    hatch(ctx, r);
  } else if (kind === Phase.PREEMPTED) {
    ctx.fillStyle = PALETTE.preempted;
    ctx.fillRect(r.x, r.y, r.w, r.h);
    ctx.fillStyle = PALETTE.preemptedText;
    const text = fitText(ctx, [`\u00d7 ${id}`, "\u00d7"], r.w - 4);
    if (text) label(ctx, text, r);
  } else if (kind === Phase.QUEUED) {
    ctx.fillStyle = PALETTE.queued;
    if (!info.outline) ctx.fillRect(r.x, r.y, r.w, r.h);
    ctx.setLineDash([3, 2]);
    ctx.strokeStyle = PALETTE.queuedLine;
    ctx.strokeRect(r.x + 0.5, r.y + 0.5, r.w - 1, r.h - 1);
    ctx.setLineDash([]);
  } else if (kind === SlotState.IDLE) {
    ctx.fillStyle = PALETTE.idle;
    ctx.fillRect(r.x, r.y, r.w, r.h);
    ctx.strokeStyle = PALETTE.idleLine;
    ctx.strokeRect(r.x + 0.5, r.y + 0.5, r.w - 1, r.h - 1);
  }
  if (info.stop) {  // the request's last token: a bar on the right edge, plus a dot when it was EOS
    ctx.fillStyle = PALETTE.text;
    ctx.fillRect(r.x + r.w - 3, r.y, 3, r.h);
    if (info.stop === StopReason.EOS && r.w > 10) {
      ctx.beginPath();
      ctx.arc(r.x + r.w - 8, r.y + 5, 2.5, 0, 2 * Math.PI);
      ctx.fill();
    }
  }
}

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

function drawFocus(ctx, rect, kind) {
  ctx.strokeStyle = PALETTE.focus;
  ctx.lineWidth = 2;
  if (kind === Phase.QUEUED) ctx.setLineDash([4, 3]);
  ctx.strokeRect(rect.x + 1, rect.y + 1, rect.w - 2, rect.h - 2);
  ctx.setLineDash([]);
  ctx.lineWidth = 1;
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

const LEGEND = [
  [Phase.PREFILL, "prefill: reads the prompt", { label: "" }],
  [Phase.DECODE, "decode: one more token", { label: "" }],
  [Phase.PADDING, "padding: finished, still computed", {}],
  [SlotState.IDLE, "idle slot", {}],
  [Phase.QUEUED, "queued", {}],
  [Phase.WAITING, "waiting for arrivals", {}],
  [Phase.PREEMPTED, "preempted: KV memory full", { label: "" }],
  [Phase.DECODE, "last token (\u25cf at EOS)", { label: "", stop: StopReason.EOS }],
  [ARRIVAL, "request arrives", {}],
];

function shown(kind, scene) {
  if (kind === Phase.QUEUED) return scene.view === "requests";
  if (kind === SlotState.IDLE) return scene.view !== "requests";
  if (kind === Phase.PREEMPTED) return scene.preemption;
  if (kind === Phase.WAITING) return scene.waiting;
  if (kind === ARRIVAL) return scene.marks;
  return true;
}

function drawLegend(ctx, layout, scene) {
  let x = layout.axis.x;
  let y = layout.legend.y + 8;
  ctx.font = `12px ${FONT}`;
  for (const [kind, label, info] of LEGEND) {
    if (!shown(kind, scene)) continue;
    const w = ctx.measureText(label).width;
    const box = kind === ARRIVAL ? 12 : 26;
    if (x + box + 5 + w > layout.width) {  // wrap onto the next row
      x = layout.axis.x;
      y += 24;
      if (y + 18 > layout.legend.y + layout.legend.h) break;
    }
    if (kind === Phase.WAITING) drawWaiting(ctx, { x, y, w: 26, h: 18 }, "");
    else if (kind === ARRIVAL) drawMark(ctx, x + 6, { y: y + 4, h: 10 });
    else drawCell(ctx, { x, y, w: 26, h: 18 }, kind, info);
    ctx.fillStyle = PALETTE.text;
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    ctx.font = `12px ${FONT}`;
    ctx.fillText(label, x + box + 5, y + 9);
    x += box + 5 + w + 18;
  }
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
