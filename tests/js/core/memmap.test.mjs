// static/js/core/memmap.js: the memory map's state rebuilt from the records' kv_* deltas, against the hand-checked
// fixture tests/golden/memmap.json (engine/report/metrics.py token_utilization gives the same number:
// tests/engine/report/test_memmap_golden.py), and scrubbing through checkpoints equal to replaying every record. No browser.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { CHECKPOINT, applyRecord, blockMap, hasBlockTables, memoryAt, tokenUtilization } from "../../../static/js/core/memmap.js";

const CASE = JSON.parse(readFileSync(new URL("../../golden/memmap.json", import.meta.url), "utf8"));
const POOL = { numBlocks: CASE.num_blocks, blockSize: CASE.block_size };

test("token utilization of the fixture's records is the hand-checked figure engine/report/metrics.py also gives", () => {
  assert.equal(tokenUtilization(CASE.records, CASE.block_size), CASE.expected.token_utilization);
});

for (const [step, want] of Object.entries(CASE.expected.maps)) {
  test(`the map after step ${step}: each block's owners, reference count, fill and kind; the host pool`, () => {
    const map = blockMap(memoryAt(CASE.records, Number(step)), POOL);
    for (const key of ["held", "cached", "free", "tokens"]) assert.equal(map[key], want[key], key);
    assert.deepEqual(map.swapped, want.swapped);
    if (want.blocks) assert.deepEqual(map.blocks.map(({ owners, refs, fill, kind }) => ({ owners, refs, fill, kind })), want.blocks);
    assert.equal(map.blockUsage, want.held / CASE.num_blocks);
    assert.equal(map.tokenUsage, want.tokens / (CASE.num_blocks * CASE.block_size));
    assert.equal(map.tokenUtilization, want.tokens / (want.held * CASE.block_size));
  });
}

test("before the first step every block is free and a run stored before paging has no block tables", () => {
  const map = blockMap(memoryAt(CASE.records, 0), POOL);
  assert.equal(map.free, CASE.num_blocks);
  assert.equal(map.tokenUtilization, null);
  const old = [{ lane: "x", step: 1, slots: [], kv_used: 3 }];
  assert.equal(hasBlockTables(old), false);
  assert.equal(tokenUtilization(old, 16), null);
  assert.equal(hasBlockTables(CASE.records), true);
});

test("a block dropped and given to another table in the same step belongs to the new table only", () => {
  const s1 = applyRecord(memoryAt([], 0), { step: 1, kv_tables: { A: [0, 1] }, kv_tokens: { A: 5 } });
  const s2 = applyRecord(s1, { step: 2, kv_dropped: ["A"], kv_tables: { B: [1] }, kv_tokens: { B: 2 } });
  const map = blockMap(s2, { numBlocks: 2, blockSize: 4 });
  assert.deepEqual(map.blocks.map((b) => [b.kind, b.owners, b.fill]), [["free", [], 0], ["held", ["B"], 2]]);
});

/** A long seeded run of random deltas over a pool of 24 blocks: requests come, grow, swap, share and leave. */
function randomRecords(n, seed) {
  let x = seed;
  const rand = () => { x = (x * 1103515245 + 12345) % 2147483648; return x / 2147483648; };
  const tables = new Map();
  const tokens = new Map();
  const records = [];
  let next = 0;
  for (let step = 1; step <= n; step += 1) {
    const r = { lane: "l", step, kv_tables: {}, kv_tokens: {} };
    const used = new Set([...tables.values()].flat());
    const free = Array.from({ length: 24 }, (_, b) => b).filter((b) => !used.has(b));
    if (rand() < 0.4 && free.length >= 2) {
      const id = `R${(next += 1)}`;
      const share = tables.size && rand() < 0.3 ? [...tables.values()][0][0] : free.pop();
      tables.set(id, [share, free.pop()]);
      tokens.set(id, 5);
      r.kv_tables[id] = tables.get(id);
    }
    for (const [id, t] of tables) {
      tokens.set(id, tokens.get(id) + 1);
      if (tokens.get(id) > t.length * 4 && free.length) { tables.set(id, [...t, free.pop()]); r.kv_tables[id] = tables.get(id); }
    }
    if (tables.size && rand() < 0.2) {
      const id = [...tables.keys()][Math.floor(rand() * tables.size)];
      tables.delete(id);
      tokens.delete(id);
      r.kv_dropped = [id];
      r.kv_swapped = { [id]: Math.floor(rand() * 3) };
      r.kv_cached = [...free].slice(0, 2);
    }
    r.kv_tokens = Object.fromEntries(tokens);
    records.push(r);
  }
  return records;
}

test("scrubbing anywhere, back and forth, through checkpoints gives what replaying every record gives", () => {
  const records = randomRecords(CHECKPOINT * 5 + 7, 7);
  const replay = [memoryAt([], 0)];
  for (const r of records) replay.push(applyRecord(replay[replay.length - 1], r));
  const pool = { numBlocks: 24, blockSize: 4 };
  for (const step of [records.length, 3, CHECKPOINT, CHECKPOINT * 3 + 1, 0, CHECKPOINT * 2 - 1, records.length - 1, 40]) {
    assert.deepEqual(blockMap(memoryAt(records, step), pool), blockMap(replay[step], pool), `step ${step}`);
  }
  // the invariants the map relies on: no block both free and held, held + cached + free = the pool
  for (const state of replay) {
    const map = blockMap(state, pool);
    assert.equal(map.held + map.cached + map.free, 24);
    for (const b of map.blocks) assert.equal(b.kind === "free", b.refs === 0 && !state.cached.includes(b.id));
  }
});

test("a request's id goes on its table's first own block, and a paged lane's map says the free blocks it keeps back (issue 38)", async () => {
  const { usageText } = await import("../../../static/js/canvas/memmap-draw.js");
  const state = { step: 3, tables: new Map([["R1", [5, 2]], ["R2", [0, 1, 3]]]), tokens: new Map([["R1", 20], ["R2", 40]]),
    cached: [], swapped: new Map() };
  const map = blockMap(state, { numBlocks: 8, blockSize: 16 });
  assert.equal(map.heads.get("R1"), 5, "R1's table starts at block 5, though block 2 is lower");
  assert.equal(map.heads.get("R2"), 0);
  assert.equal(map.free, 3);
  assert.equal(map.kept, 2, "one free block per running request");
  assert.match(usageText(map)[0], /3 free, 2 kept back \(1 per running request\)/);
  const reserve = blockMap(state, { numBlocks: 8, blockSize: 16, reserve: true });
  assert.equal(reserve.kept, 0);
  assert.doesNotMatch(usageText(reserve)[0], /kept back/);
});
