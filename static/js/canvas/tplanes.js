/**
 * A tensor-parallel lane's extras on the canvas: under its cells a band with a bar per step split into compute and
 * all-reduce (core/tpsplit.js splitBars, on the shared clock), and under its title the placement line (where its
 * processes ran, core/tpsplit.js placementLine). Draws what it is handed; reads no state.
 */
import { FONT, PALETTE, fitText } from "./cells.js";
import { splitBars } from "../core/tpsplit.js";

/** The split band: its track, then each step's compute and all-reduce bars. `spans`: [x0, x1] of steps 1..n. */
export function drawSplit(ctx, band, spans, records) {
  ctx.fillStyle = PALETTE.splitTrack;
  ctx.fillRect(band.x, band.y, band.w, band.h);
  for (const bar of splitBars(spans, records)) {
    ctx.fillStyle = bar.kind === "compute" ? PALETTE.compute : PALETTE.allreduce;
    ctx.fillRect(bar.x, band.y + 1, Math.max(0.5, bar.w), band.h - 2);
  }
}

/** The placement line in the band under the lane's title, shortened to the room there. */
export function drawPlacement(ctx, note, text, px, room) {
  ctx.font = `${px}px ${FONT}`;
  ctx.fillStyle = PALETTE.muted;
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  const parts = text.split(" \u00b7 ");
  ctx.fillText(fitText(ctx, [text, parts[0]], room) || "", note.x, note.y + note.h / 2);
}
