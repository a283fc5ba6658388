/**
 * The canvas legend: which entries a scene needs (an idle slot in the slot view, queued in the request
 * view, preempted, waiting and arrival marks only when the run shows them), how wide a label is, and
 * drawing the entries where layout.js placed them (wrapped onto as many rows as the width needs). A
 * layout without placed items (one made without a legend spec) gets the entries laid out here, as
 * before. Reads the scene and the layout; changes neither.
 */
import { FONT, PALETTE, drawCell, drawMark, drawWaiting } from "./cells.js";
import { Phase, SlotState, StopReason } from "./vocab.js";

const ARRIVAL = "arrival";  // the legend's arrival mark (not a cell kind)
const LABEL_FONT = `12px ${FONT}`;

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

function shown(kind, flags) {
  if (kind === Phase.QUEUED) return flags.view === "requests";
  if (kind === SlotState.IDLE) return flags.view !== "requests";
  if (kind === Phase.PREEMPTED) return flags.preemption;
  if (kind === Phase.WAITING) return flags.waiting;
  if (kind === ARRIVAL) return flags.marks;
  return true;
}

/** The entries a scene's legend shows, `flags` = {view, preemption, waiting, marks}: [{kind, label, info, swatch}]. */
export function legendEntries(flags) {
  return LEGEND.filter(([kind]) => shown(kind, flags))
    .map(([kind, label, info]) => ({ kind, label, info, swatch: kind === ARRIVAL ? 12 : 26 }));
}

let measuring = null;
/** A legend label's width in CSS pixels, in the font the legend draws it with. */
export function legendTextWidth(text) {
  measuring = measuring || document.createElement("canvas").getContext("2d");
  measuring.font = LABEL_FONT;
  return measuring.measureText(text).width;
}

function drawEntry(ctx, entry, x, y) {
  if (entry.kind === Phase.WAITING) drawWaiting(ctx, { x, y, w: 26, h: 18 }, "");
  else if (entry.kind === ARRIVAL) drawMark(ctx, x + 6, { y: y + 4, h: 10 });
  else drawCell(ctx, { x, y, w: 26, h: 18 }, entry.kind, entry.info);
  ctx.fillStyle = PALETTE.text;
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  ctx.font = LABEL_FONT;
  ctx.fillText(entry.label, x + entry.swatch + 5, y + 9);
}

export function drawLegend(ctx, layout, scene) {
  const { legend } = layout;
  if (legend.items) {
    for (const item of legend.items) drawEntry(ctx, item, item.x, legend.y + item.y);
    return;
  }
  let x = layout.axis.x;  // no placed items: one or two rows from the grid's left edge
  let y = legend.y + 8;
  ctx.font = LABEL_FONT;
  for (const entry of legendEntries(scene)) {
    const w = ctx.measureText(entry.label).width;
    if (x + entry.swatch + 5 + w > layout.width) {
      x = layout.axis.x;
      y += 24;
      if (y + 18 > legend.y + legend.h) break;
    }
    drawEntry(ctx, entry, x, y);
    x += entry.swatch + 5 + w + 18;
  }
}
