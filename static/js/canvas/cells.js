/**
 * How each kind of cell looks, and the colours of the lanes canvas: `PALETTE` (every colour the canvas
 * draws, chosen for WCAG AA — text at least 4.5:1 on its fill, outlines, marks and the focus ring at
 * least 3:1 against what they touch; tests/pages/test_browser_access.py checks the pairs) and the painters
 * of one cell, a wait, an arrival mark and a focus ring. Every cell kind differs by more than colour:
 * prefill carries a "P", padding is hatched, idle is an outline, preempted carries a cross, swapped out a
 * two-way arrow (its KV went to the host pool and comes back), queued a
 * dashed outline, waiting a dotted tint with a "waiting" label; the part of a prefill cell whose prompt
 * tokens came from the prefix cache is a light, striped tint. Reads its arguments, changes none.
 */
import { Phase, SlotState, StopReason } from "../core/vocab.js";

/** Okabe–Ito based: safe for the common colour-vision deficiencies; darkened where AA contrast asked for it. */
export const PALETTE = Object.freeze({
  background: "#ffffff",
  text: "#1d2330",
  muted: "#5b6472",
  rule: "#e3e6ea",
  prefill: "#e69f00", prefillText: "#3a2600", prefillCached: "#fbe3b0", prefillCachedLine: "#9a6a00",
  decode: "#56b4e9", decodeText: "#08263a",
  padding: "#dadde2", hatch: "#6b737e", paddingText: "#4a525e",
  idle: "#ffffff", idleLine: "#878f9b",
  preempted: "#c05200", preemptedText: "#ffffff",
  swapped: "#9d7fd0", swappedText: "#1d2330",
  queued: "#f1f2f4", queuedLine: "#7b838f",
  waiting: "#f6eaa6", waitingMark: "#8a7400", waitingText: "#4d4100",
  arrival: "#009e73",
  route: "#cc79a7",  // a fleet replica's arrival marks: where the router sent each request
  load: "#0072b2", loadTrack: "#eef3f8",
  compute: "#0072b2", allreduce: "#d55e00", splitTrack: "#f1f2f4",  // a TP lane's step: computing on a shard, all-reduces  // a fleet replica's load band: its requests running or waiting
  transfer: "#5e3c99", transferBand: "rgba(94, 60, 153, 0.35)",  // a P/D hand-off: its KV blocks copied to a decode engine
  kv: "#b8619a", kvTrack: "#f4ecf1", kvBudget: "#6b3a57",
  playhead: "#1d2330",
  focus: "#1d2330",
  slo: "#a01c14",  // an SLO's TTFT deadline and the ring where a request missed it: 3:1 on white, decode, prefill, padding, waiting
});

export const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";

export function fitText(ctx, options, maxW) {
  return options.find((s) => s && ctx.measureText(s).width <= maxW) || null;
}

/** Padding's diagonal hatch (or the prefix cache's stripes, in `colour`), clipped to the cell. */
function hatch(ctx, r, colour = PALETTE.hatch) {
  ctx.save();
  ctx.beginPath();
  ctx.rect(r.x, r.y, r.w, r.h);
  ctx.clip();
  ctx.strokeStyle = colour;
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (let d = -r.h; d < r.w; d += 6) {
    ctx.moveTo(r.x + d, r.y + r.h);
    ctx.lineTo(r.x + d + r.h, r.y);
  }
  ctx.stroke();
  ctx.restore();
}


/** Waiting (the lane computes nothing): a yellow tint with rows of dashes, and "waiting" (in `px`) when it fits. */
export function drawWaiting(ctx, rect, text = "waiting for arrivals", px = 12) {
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
  ctx.font = `600 ${px}px ${FONT}`;
  const fit = r.h >= px + 4 && fitText(ctx, text ? [text, "waiting"] : [], r.w - 12);
  if (fit) {
    const w = ctx.measureText(fit).width + 10;
    ctx.fillStyle = PALETTE.waiting;
    ctx.fillRect(r.x + (r.w - w) / 2, r.y + r.h / 2 - (px + 4) / 2, w, px + 4);
    ctx.fillStyle = PALETTE.waitingText;
    label(ctx, fit, r);
  }
  ctx.restore();
}


/** A request's arrival: a small downward triangle above the lane's grid. */
export function drawMark(ctx, x, band, color = PALETTE.arrival) {
  ctx.fillStyle = color;  // a fleet replica's marks: the router's decisions (PALETTE.route)
  ctx.beginPath();
  ctx.moveTo(x - 4.5, band.y + 1);
  ctx.lineTo(x + 4.5, band.y + 1);
  ctx.lineTo(x, band.y + band.h - 1);
  ctx.fill();
}

/** A P/D hand-off's copy in a decode engine's mark band: a translucent band from its start to its end (`rect`). */
export function drawTransfer(ctx, rect) {
  ctx.fillStyle = PALETTE.transferBand;
  ctx.fillRect(rect.x, rect.y, rect.w, rect.h);
  ctx.fillStyle = PALETTE.transfer;
  ctx.fillRect(rect.x, rect.y + rect.h - 2, rect.w, 2);
}

/** A fleet replica's load after each step as bars from the band's floor: [{step, load, x, y, w, h}], `loads[s - 1]` of
 * `max` over `spans[s - 1]` ([x0, x1] of step s); `band`: {x, y, w, h}. A load of 0 has no height. */
export function loadBars(band, spans, loads, max) {
  return spans.map(([x0, x1], i) => {
    const h = Math.round(((band.h - 2) * loads[i]) / Math.max(1, max));
    return { step: i + 1, load: loads[i], x: x0, y: band.y + band.h - h, w: Math.max(1, x1 - x0), h };
  });
}

/** The load band: its track and its bars (loadBars). */
export function drawLoad(ctx, band, spans, loads, max) {
  ctx.fillStyle = PALETTE.loadTrack;
  ctx.fillRect(band.x, band.y, band.w, band.h);
  ctx.fillStyle = PALETTE.load;
  for (const bar of loadBars(band, spans, loads, max)) if (bar.h > 0) ctx.fillRect(bar.x, bar.y, bar.w, bar.h);
}

/** Centred text in a rectangle, at `yFrac` of its height. */
export function label(ctx, text, r, yFrac = 0.5) {
  ctx.textBaseline = "middle";
  ctx.textAlign = "center";
  ctx.fillText(text, r.x + r.w / 2, r.y + r.h * yFrac + 0.5);
}

/**
 * The share of a prefill cell whose prompt tokens came from the prefix cache (`info.cached` of `info.prefill[1]`):
 * from the left, a light tint with stripes and a dividing line where the computed part starts.
 */
function drawCachedPart(ctx, r, info) {
  const w = Math.round((r.w * info.cached) / info.prefill[1]);
  if (w <= 0) return;
  const part = { x: r.x, y: r.y, w: Math.min(w, r.w), h: r.h };
  ctx.fillStyle = PALETTE.prefillCached;
  ctx.fillRect(part.x, part.y, part.w, part.h);
  ctx.save();
  ctx.setLineDash([2, 4]);
  hatch(ctx, part, PALETTE.prefillCachedLine);
  ctx.restore();
  ctx.fillStyle = PALETTE.prefillCachedLine;
  if (part.w < r.w) ctx.fillRect(part.x + part.w - 1, r.y, 2, r.h);
}

/** `n` ticks along a cell's bottom edge, one per token the cell wrote (as many as fit, 2 px apart). */
function ticks(ctx, r, n) {
  const gap = 2;
  const w = (r.w - 4 - gap * (n - 1)) / n;
  if (w < 1 || r.h < 8) return;
  for (let i = 0; i < n; i += 1) ctx.fillRect(r.x + 2 + i * (w + gap), r.y + r.h - 4, w, 2);
}

/** Prefill: a "P" with the request id, and for a chunked prompt how much of it is cached ("P 96/160"). */
function drawPrefill(ctx, r, id, info) {
  ctx.fillStyle = PALETTE.prefill;
  ctx.fillRect(r.x, r.y, r.w, r.h);
  if (info.cached && info.prefill) drawCachedPart(ctx, r, info);
  ctx.fillStyle = PALETTE.prefillText;
  const part = info.prefill && info.chunked ? `${info.prefill[0]}/${info.prefill[1]}` : null;
  const oneLine = part ? [`P ${part} ${id}`, `P ${part}`] : [`P ${id}`, "P"];
  const text = fitText(ctx, oneLine, r.w - 4);
  if (text) return label(ctx, text, r);
  const top = fitText(ctx, [`P ${id}`, "P"], r.w - 4);
  if (part && top && r.h >= 22) {  // "P R3" over "96/160" when one line is too narrow
    label(ctx, top, r, 0.3);
    // the fraction in the largest font that fits, else the cached count alone (presenter mode: its least size only)
    for (const px of info.minPx ? [info.minPx] : [10, 9, 8]) {
      if (info.minPx && r.h / 2 - 2 < px) break;
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

/**
 * One cell. kind: a Phase; info: {label, prefill: [cached, total] | null, chunked, cached (prompt tokens from the
 * prefix cache), stop, maxPx (its largest font), minPx (its least: a label that does not fit at it is left out, as
 * presenter mode wants; without it a narrow cell falls back to 11 px), written (tokens the cell wrote: more than 1
 * for a speculative cell that kept proposals)}.
 */
export function drawCell(ctx, rect, kind, info = {}) {
  const r = { x: rect.x + 1, y: rect.y + 1, w: Math.max(1, rect.w - 2), h: Math.max(1, rect.h - 2) };
  const id = info.label || "";
  const px = Math.max(info.minPx || 0, Math.min(info.maxPx || 12, Math.max(9, r.h - 8)));
  ctx.font = `600 ${px}px ${FONT}`;
  if (!info.minPx && px > 11 && ctx.measureText(id).width > r.w - 4) ctx.font = `600 11px ${FONT}`;  // large type: a narrow cell still says who
  if (kind === Phase.PREFILL) {
    drawPrefill(ctx, r, id, info);
  } else if (kind === Phase.DECODE) {
    ctx.fillStyle = PALETTE.decode;
    ctx.fillRect(r.x, r.y, r.w, r.h);
    ctx.fillStyle = PALETTE.decodeText;
    const many = info.written > 1;  // a speculative cell that kept proposals: "R3 +2" and one tick per token
    const text = fitText(ctx, many ? [`${id} +${info.written - 1}`, `+${info.written - 1}`, id] : [id], r.w - 4);
    if (text) label(ctx, text, r, many && r.h >= 18 ? 0.42 : 0.5);
    if (many) ticks(ctx, r, info.written);
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
  } else if (kind === Phase.SWAPPED) {
    ctx.fillStyle = PALETTE.swapped;
    ctx.fillRect(r.x, r.y, r.w, r.h);
    ctx.fillStyle = PALETTE.swappedText;
    const text = fitText(ctx, [`\u21c4 ${id}`, "\u21c4"], r.w - 4);
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

/**
 * A preemption, readable from the back of the room: a pill in the preempted colour with "× R3 preempted" in bold
 * white, and a pole from it down to the row that lost its slot (a swap out: "⇄ R3 swapped out" in the swapped colours,
 * `fill` and `ink`). `rects` = layout.flagRects.
 */
export function drawFlag(ctx, rects, text, px, fill = PALETTE.preempted, ink = PALETTE.preemptedText) {
  const { pill, pole } = rects;
  ctx.fillStyle = fill;
  if (pole.h > 0) ctx.fillRect(pole.x, pole.y, pole.w, pole.h);
  ctx.beginPath();
  ctx.roundRect(pill.x, pill.y, pill.w, pill.h, Math.min(6, pill.h / 2));
  ctx.fill();
  ctx.fillStyle = ink;
  ctx.font = `700 ${Math.max(9, Math.min(px, pill.h - 4))}px ${FONT}`;
  const fit = fitText(ctx, [text, text.replace(" preempted", "")], pill.w - 6);
  if (fit) label(ctx, fit, pill);
}

/** The cells of the request under the pointer: a 2 px ring inside the cell (dashed while it is queued). */
export function drawFocus(ctx, rect, kind) {
  ctx.strokeStyle = PALETTE.focus;
  ctx.lineWidth = 2;
  if (kind === Phase.QUEUED) ctx.setLineDash([4, 3]);
  ctx.strokeRect(rect.x + 1, rect.y + 1, rect.w - 2, rect.h - 2);
  ctx.setLineDash([]);
  ctx.lineWidth = 1;
}


/**
 * A request's TTFT deadline on its row (arrival + the SLO's TTFT target): a red bar across the row with a small
 * flag at its top, so a first token to its right came too late. `x`: the deadline; `row`: the row's rectangle.
 */
export function drawDeadline(ctx, x, row) {
  ctx.fillStyle = PALETTE.slo;
  ctx.fillRect(Math.round(x) - 1, row.y + 1, 2, row.h - 2);
  ctx.beginPath();
  ctx.moveTo(x + 1, row.y + 1);
  ctx.lineTo(x + 6, row.y + 3.5);
  ctx.lineTo(x + 1, row.y + 6);
  ctx.fill();
}

/** The cell where a request missed its SLO (its first token too late, or its last after too slow a pace): a red ring
 * with a white line inside it, which shows on every cell colour. */
export function drawSloMiss(ctx, rect) {
  const r = { x: rect.x + 1.5, y: rect.y + 1.5, w: Math.max(2, rect.w - 3), h: Math.max(2, rect.h - 3) };
  ctx.lineWidth = 3;
  ctx.strokeStyle = PALETTE.slo;
  ctx.beginPath();
  ctx.roundRect(r.x, r.y, r.w, r.h, Math.min(6, r.h / 3));
  ctx.stroke();
  ctx.lineWidth = 1;
  ctx.strokeStyle = PALETTE.background;
  ctx.beginPath();
  ctx.roundRect(r.x + 2, r.y + 2, Math.max(1, r.w - 4), Math.max(1, r.h - 4), Math.min(4, r.h / 4));
  ctx.stroke();
}
