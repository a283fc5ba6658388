/**
 * What the live lane's canvas shows of the window [from, to] of the lane clock, as data: per slot row the
 * runs of steps that did the same thing for the same request (a 60 ms step is two pixels wide at
 * 30 s per canvas, so a request's decode is drawn as one bar with its id rather than as twenty slivers), the
 * waits (gaps between steps where the lane computed nothing), the KV use of each step and the requests'
 * arrival marks. Pure: it reads the records and summaries and builds new objects; the renderer draws them.
 */
import { SlotState } from "../core/vocab.js";

export const WAIT_MS = 5;   // a gap shorter than this is never drawn as waiting

/**
 * Whether the lane had nothing left to compute after step `r`: no request waits and every request in its slots
 * finished in it. Only then is the gap to the next step waiting; any other gap is the loop's own overhead (on a busy
 * machine, a few ms between steps) and a request's run of cells continues across it.
 */
export function idleAfter(r) {
  const gone = new Set([...r.finished, ...r.returned]);
  return !r.waiting.length && r.slots.every((cell) => !cell.request || gone.has(cell.request));
}

/** The scene of `records` (oldest first) and `requests` between lane times `from` and `to`. */
export function liveScene(records, requests, from, to, slots) {
  const first = records.findIndex((r) => r.start_ms + r.ms > from && r.start_ms < to);
  const shown = first < 0 ? [] : records.slice(first).filter((r) => r.start_ms < to);
  const before = first > 0 ? records[first - 1] : null;
  const runs = [];
  const open = new Array(slots).fill(null);
  let prev = before;
  for (const r of shown) {
    const start = r.start_ms;
    const end = start + r.ms;
    const joined = prev !== null && prev !== before && !idleAfter(prev);
    r.slots.forEach((cell, row) => {
      if (row >= slots) return;
      const run = open[row];
      const request = cell.request ?? null;
      if (run && joined && !run.stop && run.kind === cell.state && run.request === request) {
        run.t1 = end;
        run.steps += 1;
        run.stop = cell.stop || null;
        return;
      }
      open[row] = { row, kind: cell.state, request, t0: start, t1: end, steps: 1, stop: cell.stop || null,
        prefill: cell.prefill || null };
      runs.push(open[row]);
    });
    prev = r;
  }
  const waits = [];
  let t = Math.max(from, 0);  // the lane clock starts at 0, when the lane opened
  let idle = !before || idleAfter(before);
  for (const r of shown) {
    if (idle && r.start_ms - t >= WAIT_MS) waits.push({ t0: t, t1: r.start_ms });
    t = Math.max(t, r.start_ms + r.ms);
    idle = idleAfter(r);
  }
  if (idle && to - t >= WAIT_MS && to > 0) waits.push({ t0: t, t1: to });
  const kv = shown.map((r) => ({ t0: r.start_ms, t1: r.start_ms + r.ms,
    frac: r.kv_capacity ? Math.min(1, r.kv_used / r.kv_capacity) : 0, capacity: r.kv_capacity }));
  const arrivals = requests.filter((q) => q.arrival_ms >= from && q.arrival_ms <= to)
    .map((q) => ({ id: q.id, t: q.arrival_ms }));
  return { from, to, slots, steps: shown.length, runs, waits, kv, arrivals,
    busy: runs.filter((run) => run.kind !== SlotState.IDLE).length };
}
