/**
 * Draws the memory map: `layoutMemory(width, maps, opts)` places each lane's block grid, its host pool row and the
 * legend; `drawMemory(ctx, layout)` paints them. One square a block: free is an outline; a block a request holds
 * is tinted in its owner's colour and filled solid from the bottom as far as tokens fill it (a part-empty last
 * block is internal fragmentation); a block several tables share has a thick frame and "×N", its reference count;
 * a cached block no request holds is grey and striped; the host pool row shows each swapped-out request's blocks.
 * Above each grid, block usage and token usage side by side. Reads the maps (memmap.js blockMap) and the layout;
 * changes neither; returns the text it wrote with its font sizes (ink.js), as the lanes renderer does.
 */
import { FONT, PALETTE, fitText } from "./cells.js";
import { noting } from "./ink.js";
import { bytesText } from "../core/scale.js";

/** Owner colours (a request's index in the workload picks one): light tints under dark text, solid for the fill. */
const OWNERS = [["#cfe8f7", "#2b7bb0"], ["#fde2b8", "#b36b00"], ["#cdeee2", "#007a59"], ["#f6d5e8", "#a0487f"],
  ["#e3dcf3", "#5e4a9c"], ["#f9d9cc", "#b2472a"], ["#e6ecc4", "#68761a"], ["#dde3ea", "#4c5968"]];
export const MEM = Object.freeze({ free: "#ffffff", freeLine: "#878f9b", cached: "#e3e6ea", cachedLine: "#6b737e",
  swapped: PALETTE.swapped, swappedText: PALETTE.swappedText, shared: "#1d2330" });

const TYPE = { normal: { title: 14, figure: 14, block: 11, legend: 12 }, present: { title: 20, figure: 20, block: 14, legend: 16 } };

/** The colour pair of request `id` (its place in `ids`, the workload's order; a sibling "R3·2" takes R3's). */
export function ownerColours(id, ids) {
  const base = String(id).split("\u00b7")[0];
  const i = ids.indexOf(base);
  const k = i >= 0 ? i : [...base].reduce((h, c) => h + c.charCodeAt(0), 0);
  return OWNERS[k % OWNERS.length];
}

/** Block usage and token usage, side by side: "blocks in use 18 / 28 (64%)", "tokens 230 / 448 slots (51%) · 80% of
 * the held blocks' slots" (the last: token utilization at this step). */
export function usageText(map) {
  const pct = (v) => `${Math.round(v * 100)}%`;
  const slots = map.numBlocks * map.blockSize;
  const filled = map.tokenUtilization === null ? "" : ` \u00b7 ${pct(map.tokenUtilization)} of the held blocks' slots`;
  const kept = map.kept ? ` · ${map.free} free, ${map.kept} kept back (1 per running request)` : "";
  return [`blocks in use ${map.held} / ${map.numBlocks} (${pct(map.blockUsage)})${kept}`,
    `tokens ${map.tokens} / ${slots} slots (${pct(map.tokenUsage)})${filled}`];
}

/**
 * Where everything goes: `maps` = [{name, title, step, map}], `opts` = {present, maxHeight (null: as tall as it
 * needs)}. Each lane: a title band, a figures band, the block grid (square blocks as large as fit, 12 to 40 px,
 * wrapped on the width), the host pool band; then the legend.
 */
export function layoutMemory(width, maps, { present = false, maxHeight = null } = {}) {
  const type = present ? TYPE.present : TYPE.normal;
  const pad = 12;
  const titleH = type.title + 12;
  const figureH = type.figure + 10;
  const hostH = type.legend + 14;
  const legendH = type.legend + 18;
  const inner = width - 2 * pad;
  const fixed = maps.length * (titleH + figureH + hostH + 8) + legendH + pad;
  const grids = maps.map((m) => Math.max(1, m.map.numBlocks));
  const fits = (c) => grids.reduce((h, n) => h + Math.ceil(n / Math.max(1, Math.floor(inner / c))) * c, 0) + fixed;
  let cell = present ? 44 : 36;
  if (maxHeight) while (cell > 12 && fits(cell) > maxHeight) cell -= 1;
  const cols = Math.max(1, Math.floor(inner / cell));
  let y = 4;
  const lanes = maps.map((m, i) => {
    const rows = Math.ceil(grids[i] / cols);
    const lane = { ...m, head: { y, h: titleH }, figures: { y: y + titleH, h: figureH },
      grid: { x: pad, y: y + titleH + figureH, cols, rows, cell }, host: { y: y + titleH + figureH + rows * cell + 4, h: hostH } };
    y = lane.host.y + hostH + 4;
    return lane;
  });
  return { width, height: y + legendH + 4, pad, type, present, lanes, legend: { y: y + 4, h: legendH } };
}

function stripes(ctx, x, y, w, h, colour) {
  ctx.save();
  ctx.beginPath();
  ctx.rect(x, y, w, h);
  ctx.clip();
  ctx.strokeStyle = colour;
  ctx.beginPath();
  for (let d = -h; d < w; d += 5) { ctx.moveTo(x + d, y + h); ctx.lineTo(x + d + h, y); }
  ctx.stroke();
  ctx.restore();
}

/** One block at (x, y), `s` px square. */
function drawBlock(ctx, x, y, s, block, map, ids, px, first) {
  const r = { x: x + 1, y: y + 1, w: s - 2, h: s - 2 };
  if (block.kind === "free") {
    ctx.fillStyle = MEM.free;
    ctx.fillRect(r.x, r.y, r.w, r.h);
    ctx.strokeStyle = MEM.freeLine;
    ctx.strokeRect(r.x + 0.5, r.y + 0.5, r.w - 1, r.h - 1);
    return;
  }
  if (block.kind === "cached") {
    ctx.fillStyle = MEM.cached;
    ctx.fillRect(r.x, r.y, r.w, r.h);
    stripes(ctx, r.x, r.y, r.w, r.h, MEM.cachedLine);
    return;
  }
  const [tint, solid] = ownerColours(block.owners[0], ids);
  ctx.fillStyle = tint;
  ctx.fillRect(r.x, r.y, r.w, r.h);
  const h = Math.round((r.h * block.fill) / map.blockSize);  // tokens in it, from the bottom
  ctx.fillStyle = solid;
  ctx.fillRect(r.x, r.y + r.h - h, r.w, h);
  if (block.kind === "shared") {
    ctx.strokeStyle = MEM.shared;
    ctx.lineWidth = 3;
    ctx.strokeRect(r.x + 1.5, r.y + 1.5, r.w - 3, r.h - 3);
    ctx.lineWidth = 1;
  }
  const text = block.kind === "shared" ? `\u00d7${block.refs}` : first ? block.owners[0] : "";
  if (text && s >= 20) {
    ctx.font = `600 ${px}px ${FONT}`;
    const fit = fitText(ctx, [text, text.split("\u00b7")[0]], r.w - 4);
    if (!fit) return;
    ctx.fillStyle = PALETTE.background;  // a white plate: readable on the tint and on the solid fill alike
    const w = ctx.measureText(fit).width + 4;
    ctx.fillRect(r.x + (r.w - w) / 2, r.y + 2, w, px + 3);
    ctx.fillStyle = PALETTE.text;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    ctx.fillText(fit, r.x + r.w / 2, r.y + 3);
  }
}

function drawLane(ink, layout, lane, ids) {
  const { type, pad, width } = layout;
  const { map, grid } = lane;
  let ctx = ink("title");
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  ctx.font = `600 ${type.title}px ${FONT}`;
  ctx.fillStyle = PALETTE.text;
  const where = lane.step > 0 ? `after step ${lane.step}` : "before the first step";
  const bytes = map.kvBytes ? ` \u00b7 K/V tensors ${bytesText(map.kvBytes)}` : "";
  ctx.fillText(fitText(ctx, [`${lane.title} \u2014 KV blocks ${where}${bytes}`, `${lane.title} \u2014 KV blocks ${where}`,
    `${lane.name} \u2014 ${where}`, lane.name], width - 2 * pad) || "",
    pad, lane.head.y + lane.head.h / 2);
  ctx = ink("figure");
  ctx.font = `600 ${type.figure}px ${FONT}`;
  const [blocks, tokens] = usageText(map);
  ctx.fillStyle = PALETTE.text;
  const y = lane.figures.y + lane.figures.h / 2;
  ctx.fillText(blocks, pad, y);
  ctx.fillStyle = PALETTE.kvBudget;
  const tx = pad + ctx.measureText(blocks).width + 32;
  ctx.fillText(fitText(ctx, [tokens, tokens.split(" \u00b7 ")[0]], width - pad - tx) || "", tx, y);
  ctx = ink("block");
  map.blocks.forEach((block, i) => {
    // a request's id on the first block of its table it holds alone (its table's order, not the lowest block id)
    const first = block.owners.length === 1 && (map.heads ? map.heads.get(block.owners[0]) === block.id : true);
    drawBlock(ctx, grid.x + (i % grid.cols) * grid.cell, grid.y + Math.floor(i / grid.cols) * grid.cell, grid.cell, block,
      map, ids, type.block, first);
  });
  ctx = ink("host");
  ctx.font = `${type.legend}px ${FONT}`;
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  ctx.fillStyle = PALETTE.muted;
  const hy = lane.host.y + lane.host.h / 2;
  const held = map.swapped.reduce((n, s) => n + s.blocks, 0);
  const head = map.hostBlocks ? `host pool ${held} / ${map.hostBlocks} blocks:` : "host pool:";
  ctx.fillText(head, pad, hy);
  let x = pad + ctx.measureText(head).width + 10;
  if (!map.swapped.length) ctx.fillText(map.swaps ? "nothing swapped out" : "none (preemption recomputes)", x, hy);
  for (const s of map.swapped) {
    const text = `\u21c4 ${s.id} \u00b7 ${s.blocks} ${s.blocks === 1 ? "block" : "blocks"}`;
    ctx.font = `600 ${type.legend}px ${FONT}`;
    const w = ctx.measureText(text).width + 12;
    ctx.fillStyle = MEM.swapped;
    ctx.fillRect(x, lane.host.y + 2, w, lane.host.h - 4);
    ctx.fillStyle = MEM.swappedText;
    ctx.fillText(text, x + 6, hy);
    x += w + 8;
  }
}

const LEGEND = [["held", "held by a request (solid: its tokens)"], ["shared", "shared \u00d7N"], ["cached", "cached, no request"],
  ["swapped", "\u21c4 swapped out"], ["free", "free"]];

function drawLegend(ctx, layout) {
  const { type, pad, legend } = layout;
  ctx.font = `${type.legend}px ${FONT}`;
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  const s = type.legend + 4;
  let x = pad;
  const y = legend.y + legend.h / 2;
  for (const [kind, text] of LEGEND) {
    const block = { kind, owners: ["R1"], refs: 2, fill: 2 };
    if (kind === "swapped") {
      ctx.fillStyle = MEM.swapped;
      ctx.fillRect(x, y - s / 2, s, s);
    } else drawBlock(ctx, x - 1, y - s / 2 - 1, s + 2, block, { blockSize: 4 }, ["R1"], 0, false);
    ctx.fillStyle = PALETTE.muted;
    ctx.font = `${type.legend}px ${FONT}`;
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    ctx.fillText(text, x + s + 6, y);
    x += s + 6 + ctx.measureText(text).width + 18;
  }
}

/** Paint the map; returns the text it wrote: [{kind ("title", "figure", "block", "host", "legend"), text, px, x, y}]. */
export function drawMemory(ctx, layout, ids) {
  const labels = [];
  const ink = (kind) => noting(ctx, kind, labels);
  ctx.fillStyle = PALETTE.background;
  ctx.fillRect(0, 0, layout.width, layout.height);
  for (const lane of layout.lanes) drawLane(ink, layout, lane, ids);
  drawLegend(ink("legend"), layout);
  return labels;
}
