/**
 * The memory map on the page: the "memory map" toggle (its button, the m key through controls.js), and each frame
 * the map of every lane at the playhead drawn in place of the lanes canvas. The pool of a lane (blocks, block
 * size, host blocks) comes from its run facts when the server sent them, else from the records themselves (the
 * budget's blocks, the highest block id any table names). What it drew is on window.__memmap for the browser
 * tests. Reads the scene (each lane's step at the playhead) and the run; owns only its canvas. A lane's facts are
 * `kv_pool` on its first record (engine/step.py: kv_bytes, num_blocks, block_size, host_blocks, kv_allocation,
 * preemption).
 */
import { blockMap, hasBlockTables, memoryAt } from "../core/memmap.js";
import { drawMemory, layoutMemory } from "../canvas/memmap-draw.js";
import { laneBlockSize } from "../core/metrics.js";
import { scaleLine } from "../core/scale.js";

export const MEMORY = "memory";  // the input action: show or hide the map

/** The lane's pool: {numBlocks, blockSize, hostBlocks (0: not known), swaps (the lane swaps its victims out)}.
 * `reserve`: its kv_allocation reserves whole requests (no free block kept per running request).
 * `facts`: the lane's run facts, or undefined; `options`: the lane's own options. */
export function poolOf(records, workload, facts, options = {}) {
  const blockSize = (facts && facts.block_size) || laneBlockSize(records, workload);
  let numBlocks = (facts && facts.num_blocks) || 0;
  let swaps = ((facts && facts.preemption) || options.preemption || workload.preemption) === "swap";
  const hostBlocks = (facts && facts.host_blocks) || 0;
  for (const r of records) {
    numBlocks = Math.max(numBlocks, r.kv_blocks_total || 0, ...(r.kv_cached || []).map((b) => b + 1));
    for (const table of Object.values(r.kv_tables || {})) numBlocks = Math.max(numBlocks, ...table.map((b) => b + 1));
    swaps = swaps || Object.keys(r.kv_swapped || {}).length > 0;
  }
  const reserve = ((facts && facts.kv_allocation) || options.kv_allocation || workload.kv_allocation) === "reserve";
  return { numBlocks, blockSize, hostBlocks, swaps, reserve, kvBytes: (facts && facts.kv_bytes) || 0 };
}

/** The button that shows or hides the map pushes MEMORY; its pressed state follows `on` (syncMemory). */
export function bindMemory(button, push) {
  if (button) button.addEventListener("click", () => push({ type: MEMORY }));
}

export function syncMemory(button, on, available) {
  if (!button) return;
  button.disabled = !available;
  const pressed = on && available ? "true" : "false";
  if (button.getAttribute("aria-pressed") !== pressed) button.setAttribute("aria-pressed", pressed);
}

/** Whether a run's lanes carry block tables (a run stored before paging has no map); a fleet's are its replicas'. */
export function memoryAvailable(derived) {
  return (derived.drawn || derived.lanes).some((l) => hasBlockTables(l.records));
}

/**
 * The map's part of a frame: the button's state, and the map drawn on `canvas` in place of the lanes when `on` and the
 * run has block tables (`size` as renderMemory takes it), with `scale`'s line under it: the largest pool drawn, in a
 * production model's bytes (core/scale.js). Returns whether the map shows.
 */
export function showMemory({ canvas, button, scale }, on, derived, scene, run, size) {
  const available = memoryAvailable(derived);
  syncMemory(button, on, available);
  canvas.hidden = !(on && available);
  const shown = on && available ? renderMemory(canvas, scene, run, size) : [];
  if (scale) {
    const line = scaleLine(Math.max(0, ...shown.map((l) => l.numBlocks * l.blockSize)));
    if (scale.textContent !== line) scale.textContent = line;
    scale.hidden = !line;
  }
  return on && available;
}

let sizeKey = "";
/**
 * Draw the map of `scene`'s lanes (each at the step the playhead shows) on `canvas`, `width` CSS px wide; `maxHeight`:
 * presenter mode's budget (null: as tall as it needs). Returns what it drew: [{name, step, held, cached, free,
 * tokens, swapped, blockUsage, tokenUsage}], also window.__memmap.
 */
export function renderMemory(canvas, scene, run, { width, maxHeight = null, present = false }) {
  const lanes = scene.lanes.filter((l) => hasBlockTables(l.records));
  const maps = lanes.map((l) => {
    const step = Math.min(l.revealed, l.records.length);
    const facts = l.records.length ? l.records[0].kv_pool : undefined;
    return { name: l.name, title: l.title, step, map: blockMap(memoryAt(l.records, step),
      poolOf(l.records, run.workload, facts, l.config.options)) };
  });
  const layout = layoutMemory(width, maps, { present, maxHeight });
  const dpr = window.devicePixelRatio || 1;
  const size = `${layout.width}x${layout.height}@${dpr}`;
  if (size !== sizeKey) {
    canvas.style.width = `${layout.width}px`;
    canvas.style.height = `${layout.height}px`;
    canvas.width = Math.round(layout.width * dpr);
    canvas.height = Math.round(layout.height * dpr);
    canvas.getContext("2d").setTransform(dpr, 0, 0, dpr, 0, 0);
    sizeKey = size;
  }
  const labels = drawMemory(canvas.getContext("2d"), layout, run.workload.requests.map((q) => q.id));
  const shown = maps.map(({ name, step, map }) => ({ name, step, held: map.held, cached: map.cached, free: map.free, kept: map.kept,
    tokens: map.tokens, numBlocks: map.numBlocks, blockSize: map.blockSize, swapped: map.swapped, blockUsage: map.blockUsage, tokenUsage: map.tokenUsage,
    shared: map.blocks.filter((b) => b.kind === "shared").map((b) => ({ id: b.id, refs: b.refs })) }));
  window.__memmap = { lanes: shown, labels, height: layout.height, width: layout.width };
  return shown;
}
