/**
 * The memory map's state: a lane's KV blocks at a step, rebuilt from the step records' deltas (engine/step.py
 * `kv_tables`, `kv_dropped`, `kv_cached`, `kv_swapped`, `kv_tokens`; docs/memory.md). A pure reducer over records,
 * with a checkpoint every CHECKPOINT steps (memoized per records array) so a scrub to any step replays at most
 * that many records. `blockMap` turns a state into what the map draws: every block's owners, reference count and
 * fill, the cached and free blocks, the host pool, and block usage beside token usage. `tokenUtilization` is the
 * lane metric engine/report/metrics.py computes (its twin). Knows nothing of the DOM or the canvas.
 */

export const CHECKPOINT = 32;

const EMPTY = Object.freeze({ step: 0, tables: new Map(), tokens: new Map(), cached: [], swapped: new Map() });

/** Whether a lane's records carry the paged cache's block tables (runs stored before paging do not). */
export function hasBlockTables(records) {
  return records.some((r) => r.kv_tables || r.kv_tokens || r.kv_dropped || r.kv_swapped);
}

/** The state after `record`, from the state before it (neither is changed). */
export function applyRecord(state, r) {
  const tables = new Map(state.tables);
  for (const id of r.kv_dropped || []) tables.delete(id);  // released first: a table set in the same step wins
  for (const [id, table] of Object.entries(r.kv_tables || {})) tables.set(id, table);
  const tokens = new Map(Object.entries(r.kv_tokens || {}));  // every request holding device blocks, every step
  for (const id of tables.keys()) if (!tokens.has(id)) tables.delete(id);
  const swapped = new Map(state.swapped);
  for (const [id, n] of Object.entries(r.kv_swapped || {})) {
    if (n > 0) swapped.set(id, n);
    else swapped.delete(id);
  }
  const cached = r.kv_cached === undefined || r.kv_cached === null ? state.cached : r.kv_cached;
  return { step: r.step, tables, tokens, cached, swapped };
}

const memo = new WeakMap();  // records array -> [state after step 0, CHECKPOINT, 2 * CHECKPOINT, ...]

/** The lane's memory after its first `step` records (0: before any). */
export function memoryAt(records, step) {
  const n = Math.max(0, Math.min(step, records.length));
  let marks = memo.get(records);
  if (!marks) {
    marks = [EMPTY];
    memo.set(records, marks);
  }
  const k = Math.floor(n / CHECKPOINT);
  while (marks.length <= k) {  // the next checkpoint from the last one
    let s = marks[marks.length - 1];
    const from = (marks.length - 1) * CHECKPOINT;
    for (let i = from; i < from + CHECKPOINT; i += 1) s = applyRecord(s, records[i]);
    marks.push(s);
  }
  let state = marks[k];
  for (let i = k * CHECKPOINT; i < n; i += 1) state = applyRecord(state, records[i]);
  return state;
}

/**
 * What the map draws of a state: {blocks: [{id, owners, refs, fill, kind}], swapped: [{id, blocks}], hostBlocks, swaps,
 * numBlocks, blockSize, held, cached, free, tokens, blockUsage, tokenUsage, tokenUtilization}. kind: "held" (one
 * table), "shared" (refs > 1), "cached" (the prefix cache keeps it, no request holds it) or "free"; fill: token
 * positions of the block holding a token (0..blockSize; the most any owner fills). blockUsage: held blocks ÷ the
 * pool; tokenUsage: tokens held ÷ the pool's token slots; tokenUtilization: tokens held ÷ the held blocks' slots.
 * heads: request id -> the block its id is written on, the first block of its table (in table order, not block
 * order) it holds alone. kept: the free blocks a paged lane keeps back, one per running request, so their next tokens
 * fit (engine/sched/policies.py's headroom; a "reserve" lane keeps none): a prompt waits "N KV blocks short" counting them.
 */
export function blockMap(state, { numBlocks, blockSize, hostBlocks = 0, swaps = false, kvBytes = 0, reserve = false }) {
  const blocks = Array.from({ length: numBlocks }, (_, id) => ({ id, owners: [], refs: 0, fill: 0, kind: "free" }));
  for (const [rid, table] of state.tables) {
    const n = state.tokens.get(rid) || 0;
    table.forEach((b, i) => {
      const block = blocks[b];
      if (!block) return;  // a table naming a block past the pool: a record this map cannot place
      block.owners.push(rid);
      block.refs += 1;
      block.fill = Math.max(block.fill, Math.min(blockSize, Math.max(0, n - i * blockSize)));
    });
  }
  for (const b of state.cached) if (blocks[b] && !blocks[b].refs) blocks[b].kind = "cached";
  let held = 0;
  let tokens = 0;
  for (const block of blocks) {
    if (!block.refs) continue;
    block.kind = block.refs > 1 ? "shared" : "held";
    held += 1;
    tokens += block.fill;
  }
  const cached = blocks.filter((b) => b.kind === "cached").length;
  const swapped = [...state.swapped].map(([id, n]) => ({ id, blocks: n }));
  const heads = new Map();
  for (const [rid, table] of state.tables) {
    const own = table.find((b) => blocks[b] && blocks[b].refs === 1);
    if (own !== undefined) heads.set(rid, own);
  }
  const free = numBlocks - held - cached;
  const kept = reserve ? 0 : Math.min(free, state.tables.size);
  return { blocks, swapped, hostBlocks, swaps: swaps || swapped.length > 0, kvBytes, numBlocks, blockSize, held, cached, free, kept, heads, tokens,
    blockUsage: numBlocks ? held / numBlocks : 0, tokenUsage: numBlocks ? tokens / (numBlocks * blockSize) : 0,
    tokenUtilization: held ? tokens / (held * blockSize) : null };
}

/**
 * Token utilization over a run (engine/report/metrics.py token_utilization): the token slots holding a token, summed over
 * every step, ÷ the token slots of the blocks requests held (each held device block once, shared or not), summed
 * over the same steps. Cached blocks no request holds and the host pool count in neither. null: no block tables.
 */
export function tokenUtilization(records, blockSize) {
  if (!blockSize || !hasBlockTables(records)) return null;
  let state = EMPTY;
  let filled = 0;
  let slots = 0;
  for (const r of records) {
    state = applyRecord(state, r);
    const fill = new Map();
    for (const [rid, table] of state.tables) {
      const n = state.tokens.get(rid) || 0;
      table.forEach((b, i) => fill.set(b, Math.max(fill.get(b) || 0, Math.min(blockSize, Math.max(0, n - i * blockSize)))));
    }
    for (const f of fill.values()) filled += f;
    slots += fill.size * blockSize;
  }
  return slots ? filled / slots : null;
}
