/**
 * The memory lessons' numbers (demos/paged-vs-reserve.json, demos/swap-vs-recompute.json), measured from a lane's
 * step records: its batch size, its token utilization as a percentage, and the cost of a preempted block each way,
 * swapped (the records' copy_ms over the blocks copied) or recomputed (the prefill time its re-read took). lesson.js
 * fills `{lane.key}` with `memoryValue`; claims.js checks the memory claims with `batchSizes`, `copyCosts` and the
 * lanes' eviction counts. Pure.
 */
import { SlotState } from "../core/vocab.js";

const RUNS = new Set([SlotState.PREFILL, SlotState.DECODE]);

/** Requests a step computed (prefill and decode rows), over the steps that computed something: {mean, max}. */
export function batchSizes(records) {
  const sizes = records.filter((r) => (r.forward || "none") !== "none")
    .map((r) => r.slots.filter((c) => RUNS.has(c.state)).length);
  return { mean: sizes.length ? sizes.reduce((a, b) => a + b, 0) / sizes.length : null, max: sizes.length ? Math.max(...sizes) : null };
}

function median(values) {
  if (!values.length) return null;
  const v = [...values].sort((a, b) => a - b);
  return v[Math.floor((v.length - 1) / 2)];
}

/**
 * What preemption cost a lane, per KV block: {swapBlocks, swapMs, recomputeBlocks, recomputeMs}. Swap: every block
 * copied out or back (the change of each request's host-pool holding, `kv_swapped`), and the steps' measured
 * `copy_ms`. Recompute: the prompt and answer tokens a preempted request read again, in blocks, and the time that
 * took: each such step's time over the lane's median decode-only step, in the share of its prefill tokens that were
 * re-read.
 */
export function copyCosts(records, blockSize) {
  const host = new Map();
  let swapBlocks = 0;
  let swapMs = 0;
  for (const r of records) {
    for (const [id, n] of Object.entries(r.kv_swapped || {})) {
      swapBlocks += Math.abs(n - (host.get(id) || 0));
      host.set(id, n);
    }
    swapMs += r.copy_ms || 0;
  }
  const decode = median(records.filter((r) => r.forward === "decode").map((r) => r.ms));
  const progress = new Map();
  const preempted = new Set();
  let recomputeTokens = 0;
  let recomputeMs = 0;
  for (const r of records) {
    let again = 0;
    let read = 0;
    for (const cell of r.slots) {
      if (cell.state === SlotState.PREEMPTED) {
        progress.set(cell.request, 0);
        preempted.add(cell.request);
      } else if (cell.state === SlotState.PREFILL && cell.prefill) {
        const n = cell.prefill[0] - (progress.get(cell.request) || 0) - (cell.cached || 0);
        progress.set(cell.request, cell.prefill[0]);
        read += n;
        if (preempted.has(cell.request)) again += n;
      }
    }
    if (again && read) {
      recomputeTokens += again;
      recomputeMs += (Math.max(0, r.ms - (decode || 0)) * again) / read;
    }
  }
  return { swapBlocks, swapMs, recomputeBlocks: recomputeTokens / blockSize, recomputeMs };
}

const perBlock = (ms, blocks) => (blocks > 0 ? (ms / blocks).toFixed(2) : null);

/**
 * A memory lesson's value of `key` for a finished lane, as text, or undefined when `key` is none of these:
 * batch_mean, batch_max, token_use ("57%"), swap_ms_per_block, recompute_ms_per_block, swapped_blocks, swap_ms and
 * recompute_ms (the lane's whole time spent on each).
 */
export function memoryValue(lane, m, key, blockSize) {
  if (key === "batch_mean") return batchSizes(lane.records).mean?.toFixed(1) ?? null;
  if (key === "batch_max") return String(batchSizes(lane.records).max ?? "") || null;
  if (key === "token_use") return typeof m.token_utilization === "number" ? `${Math.round(m.token_utilization * 100)}%` : null;
  if (!["swap_ms_per_block", "recompute_ms_per_block", "swapped_blocks", "swap_ms", "recompute_ms"].includes(key)) return undefined;
  const c = copyCosts(lane.records, blockSize);
  if (key === "swapped_blocks") return String(c.swapBlocks);
  if (key === "swap_ms" || key === "recompute_ms") return (key === "swap_ms" ? c.swapMs : c.recomputeMs).toFixed(1);
  return key === "swap_ms_per_block" ? perBlock(c.swapMs, c.swapBlocks) : perBlock(c.recomputeMs, c.recomputeBlocks);
}

const pct = (v) => `${Math.round(v * 100)}%`;

/** Claim: `lane` runs more requests at once than each of `others` (the mean batch size). */
export function runsMoreAtOnce(derived, { lane, others }, laneOf) {
  const a = laneOf(derived, lane);
  const bs = others.map((o) => laneOf(derived, o));
  if (!a || bs.some((b) => !b)) return null;
  const mine = batchSizes(a.records).mean;
  const beaten = bs.filter((b) => batchSizes(b.records).mean >= mine);
  if (!beaten.length) return { holds: true };
  return { holds: false, text: `yet on this run ${lane} ran no more requests at once (${mine.toFixed(1)} a step) than `
    + beaten.map((b) => `${b.name} (${batchSizes(b.records).mean.toFixed(1)})`).join(" and ") };
}

/** Claim: `lane`'s token utilization is above each of `others`'. */
export function fillsMoreOfItsBlocks(derived, { lane, others }, laneOf) {
  const m = derived.metrics;
  if (!laneOf(derived, lane) || others.some((o) => !laneOf(derived, o))) return null;
  const mine = m[lane].token_utilization;
  if (typeof mine !== "number" || others.some((o) => typeof m[o].token_utilization !== "number")) return null;
  const beaten = others.filter((o) => m[o].token_utilization >= mine);
  if (!beaten.length) return { holds: true };
  return { holds: false, text: `yet on this run ${lane}'s token utilization (${pct(mine)}) was no higher than `
    + beaten.map((o) => `${o}'s (${pct(m[o].token_utilization)})`).join(" and ") };
}

/** Claim: both kinds of eviction happened, as the flags and the captions show them (issue 38: the swap lane's table once
 * said 0): `lane` swapped a request out (its metrics' `swaps`) and each of `others` evicted one to read it again
 * (`preemptions`, every eviction, less `swaps`). */
export function bothEvict(derived, { lane, others }, laneOf) {
  const m = derived.metrics;
  if (!laneOf(derived, lane) || others.some((o) => !laneOf(derived, o))) return null;
  const none = [];
  if (!((m[lane].swaps || 0) > 0)) none.push(`${lane} swapped none out`);
  for (const o of others) if (!(m[o].preemptions - (m[o].swaps || 0) > 0)) none.push(`${o} evicted none to recompute`);
  if (!none.length) return { holds: true };
  return { holds: false, text: `yet on this run ${none.join(" and ")}: its KV memory sufficed` };
}

/** Claim: a block `lane` swapped cost less time than a block `others[0]` recomputed. */
export function copyCheaper(derived, { lane, others }, laneOf, blockSize) {
  const a = laneOf(derived, lane);
  const b = laneOf(derived, others[0]);
  if (!a || !b) return null;
  const swap = copyCosts(a.records, blockSize(a));
  const again = copyCosts(b.records, blockSize(b));
  if (!swap.swapBlocks || !again.recomputeBlocks) return null;
  const [mine, theirs] = [swap.swapMs / swap.swapBlocks, again.recomputeMs / again.recomputeBlocks];
  if (mine < theirs) return { holds: true };
  return { holds: false, text: `yet on this run copying a block (${mine.toFixed(2)} ms) cost no less than recomputing one`
    + ` (${theirs.toFixed(2)} ms)` };
}

/** Claim: `lane` spent less time copying blocks out and in than `others[0]` spent reading its victims again. */
export function losesLessToPreemption(derived, { lane, others }, laneOf, blockSize) {
  const a = laneOf(derived, lane);
  const b = laneOf(derived, others[0]);
  if (!a || !b) return null;
  const [mine, theirs] = [copyCosts(a.records, blockSize(a)).swapMs, copyCosts(b.records, blockSize(b)).recomputeMs];
  if (mine < theirs) return { holds: true };
  return { holds: false, text: `yet on this run swapping took ${mine.toFixed(1)} ms in all, no less than the`
    + ` ${theirs.toFixed(1)} ms recomputing took` };
}
