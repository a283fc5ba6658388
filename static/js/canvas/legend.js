/**
 * The canvas legend: which entries a scene needs (an idle slot in the slot view, queued in the request
 * view, preempted, waiting and arrival marks only when the run shows them, an SLO's deadline and missed
 * mark when targets are set, a fleet's routing mark and load band when a lane is a fleet, and always the KV memory
 * strip), how wide a label is, and drawing the entries where layout.js placed them (wrapped onto as
 * many rows as the width needs). Each entry names its glossary term (glossary.js), which the page's
 * focusable legend keys over the canvas explain. A layout without placed items (one made without a
 * legend spec) gets the entries laid out here, as before. Reads the scene and the layout; changes neither.
 */
import { FONT, PALETTE, drawCell, drawDeadline, drawLoad, drawMark, drawSloMiss, drawTransfer, drawWaiting } from "./cells.js";
import { PRESENT_MIN } from "./layout.js";
import { Phase, SlotState, StopReason } from "../core/vocab.js";

const ARRIVAL = "arrival";  // the legend's arrival mark (not a cell kind)
const KV = "kv";            // the KV memory strip under each lane
const CACHED = "cached";    // a prefill cell whose prompt came partly from the prefix cache
const DEADLINE = "deadline";  // an SLO's TTFT deadline on a request's row (the request view)
const MISSED = "missed";    // the ring on the cell where a request missed its SLO
const ROUTED = "routed";    // a fleet replica's arrival mark: where the router sent a request
const LOAD = "load";        // a fleet replica's load band
const COMPUTE = "compute";  // a tensor-parallel step's bar: computing on the rank's shard
const ALLREDUCE = "allreduce";  // and waiting in all-reduces
const TRANSFER = "transfer";  // a P/D hand-off: the copy of a request's KV blocks to a decode engine, and its arrival there

// [kind, label, cell info, glossary term, short label (presenter mode: one row; the glossary says the rest)]
const LEGEND = [
  [Phase.PREFILL, "prefill: reads the prompt", { label: "" }, "prefill", "prefill"],
  [CACHED, "prefill from the prefix cache", { label: "", prefill: [2, 3], cached: 2 }, "prefix_cache", "prefix cache"],
  [Phase.DECODE, "decode: one more token", { label: "" }, "decode", "decode"],
  [Phase.PADDING, "padding: finished, still computed", {}, "padding", "padding"],
  [SlotState.IDLE, "idle slot", {}, "idle", "idle slot"],
  [Phase.QUEUED, "queued", {}, "queued", "queued"],
  [Phase.WAITING, "waiting for arrivals", {}, "waiting", "waiting"],
  [Phase.PREEMPTED, "preempted: KV memory full", { label: "" }, "preempted", "preempted"],
  [Phase.SWAPPED, "swapped out: KV to the host pool", { label: "" }, "swapped", "swapped out"],
  [Phase.DECODE, "several tokens: proposals kept", { label: "", written: 3 }, "several_tokens", "several tokens"],
  [Phase.DECODE, "last token (\u25cf at EOS)", { label: "", stop: StopReason.EOS }, "last_token", "last token"],
  [ARRIVAL, "request arrives", {}, "arrival", "arrives"],
  [ROUTED, "routed: the router sent it here", {}, "routed", "routed"],
  [LOAD, "replica load: running + waiting", {}, "replica_load", "load"],
  [COMPUTE, "TP step: compute on a shard", {}, "tp_compute", "compute"],
  [ALLREDUCE, "TP step: all-reduce", {}, "allreduce", "all-reduce"],
  [TRANSFER, "KV copied: prefill \u2192 decode engine", {}, "transfer", "KV copy"],
  [DEADLINE, "TTFT deadline (SLO)", {}, "slo", "deadline"],
  [MISSED, "missed the SLO", { label: "" }, "slo", "SLO miss"],
  [KV, "KV memory (- - budget)", {}, "kv", "KV memory"],
];

// marks narrower than a cell: the arrival triangle, the deadline bar, the missed ring (a row of presenter mode's legend
// at 1280 px has no room to spare)
const NARROW = Object.freeze({ [ARRIVAL]: 12, [ROUTED]: 12, [TRANSFER]: 18, [DEADLINE]: 12, [MISSED]: 18 });

function shown(kind, flags, term) {
  if (kind === Phase.QUEUED) return flags.view === "requests";
  if (kind === SlotState.IDLE) return flags.view !== "requests";
  if (kind === Phase.PREEMPTED) return flags.preemption && !flags.swapOnly;
  if (kind === Phase.SWAPPED) return Boolean(flags.swap);
  if (kind === Phase.WAITING) return flags.waiting;
  if (kind === ARRIVAL) return flags.marks && !flags.fleetOnly;  // a fleet's arrivals are its routing marks
  if (kind === ROUTED || kind === LOAD) return Boolean(flags.fleet);
  if (kind === TRANSFER) return Boolean(flags.pd);
  if (kind === COMPUTE || kind === ALLREDUCE) return Boolean(flags.split);
  if (kind === CACHED) return Boolean(flags.prefixCache);
  if (kind === DEADLINE) return Boolean(flags.slo) && flags.view === "requests";
  if (kind === MISSED) return Boolean(flags.slo);
  if (term === "several_tokens") return Boolean(flags.speculative);
  return true;
}

/**
 * The entries a scene's legend shows, `flags` = {view, preemption, waiting, marks, speculative}: [{kind, label, info, term, swatch}];
 * `px`: the label font size (the swatches grow with it); `short`: the short labels (presenter mode).
 */
export function legendEntries(flags, px = 12, short = false) {
  const cell = Math.round((26 * px) / 12);
  return LEGEND.filter(([kind, , , term]) => shown(kind, flags, term)).map(([kind, label, info, term, brief]) => ({ kind,
    label: short ? brief : label, info, term, swatch: NARROW[kind] || cell }));
}

let measuring = null;
/** A legend label's width in CSS pixels, in the font the legend draws it with (`px`: its size). */
export function legendTextWidth(text, px = 12) {
  measuring = measuring || document.createElement("canvas").getContext("2d");
  measuring.font = `${px}px ${FONT}`;
  return measuring.measureText(text).width;
}

/** The KV strip's swatch: a track, a fill and the dashed budget line on top. */
function drawKvSwatch(ctx, r) {
  ctx.fillStyle = PALETTE.kvTrack;
  ctx.fillRect(r.x, r.y, r.w, r.h);
  ctx.fillStyle = PALETTE.kv;
  ctx.fillRect(r.x, r.y + r.h * 0.35, r.w, r.h * 0.65);
  ctx.strokeStyle = PALETTE.kvBudget;
  ctx.setLineDash([4, 3]);
  ctx.beginPath();
  ctx.moveTo(r.x, r.y + 0.5);
  ctx.lineTo(r.x + r.w, r.y + 0.5);
  ctx.stroke();
  ctx.setLineDash([]);
}

function drawEntry(ctx, entry, x, y, px, h = 18) {
  const swatch = { x, y, w: entry.swatch, h };
  // a swatch's letters (P, D, …) in presenter mode's larger type are at least 14 px, as the cells' labels are
  const info = px > 12 ? { ...entry.info, maxPx: px, minPx: PRESENT_MIN.cellPx } : entry.info;
  if (entry.kind === Phase.WAITING) drawWaiting(ctx, swatch, "");
  else if (entry.kind === ARRIVAL) drawMark(ctx, x + 6, { y: y + h / 2 - 5, h: 10 });
  else if (entry.kind === ROUTED) drawMark(ctx, x + 6, { y: y + h / 2 - 5, h: 10 }, PALETTE.route);
  else if (entry.kind === TRANSFER) {
    drawTransfer(ctx, { x, y: y + h / 2 - 5, w: 12, h: 10 });
    drawMark(ctx, x + 12, { y: y + h / 2 - 5, h: 10 }, PALETTE.transfer);
  } else if (entry.kind === LOAD) drawLoad(ctx, swatch, [[x, x + 6], [x + 6, x + 12], [x + 12, x + 18], [x + 18, x + 26]], [1, 3, 2, 4], 4);
  else if (entry.kind === KV) drawKvSwatch(ctx, swatch);
  else if (entry.kind === COMPUTE || entry.kind === ALLREDUCE) {
    ctx.fillStyle = entry.kind === COMPUTE ? PALETTE.compute : PALETTE.allreduce;
    ctx.fillRect(swatch.x, swatch.y + 4, swatch.w, swatch.h - 8);
  }
  else if (entry.kind === CACHED) drawCell(ctx, swatch, Phase.PREFILL, info);
  else if (entry.kind === DEADLINE) drawDeadline(ctx, x + 4, swatch);
  else if (entry.kind === MISSED) drawSloMiss(ctx, swatch);
  else drawCell(ctx, swatch, entry.kind, info);
  ctx.fillStyle = PALETTE.text;
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  ctx.font = `${px}px ${FONT}`;
  ctx.fillText(entry.label, x + entry.swatch + 5, y + h / 2);
}

export function drawLegend(ctx, layout, scene) {
  const { legend } = layout;
  const px = layout.type ? layout.type.legend : 12;
  if (legend.items) {
    for (const item of legend.items) drawEntry(ctx, item, item.x, legend.y + item.y, px, item.h);
    return;
  }
  let x = layout.axis.x;  // no placed items: one or two rows from the grid's left edge
  let y = legend.y + 8;
  ctx.font = `${px}px ${FONT}`;
  for (const entry of legendEntries(scene)) {
    const w = ctx.measureText(entry.label).width;
    if (x + entry.swatch + 5 + w > layout.width) {
      x = layout.axis.x;
      y += 24;
      if (y + 18 > legend.y + legend.h) break;
    }
    drawEntry(ctx, entry, x, y, px);
    x += entry.swatch + 5 + w + 18;
  }
}
