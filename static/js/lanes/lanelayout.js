/**
 * The lanes' layout for a frame: the rows each drawn lane shows in the current view, its timeline, and the legend
 * over `axis` ({from, span}), laid out by canvas/layout.js. In presenter mode (`maxHeight` set) lanes never shrink
 * below what the back of the room reads: those that do not fit take turns. Memoized on everything it reads, so an
 * unchanged frame reuses the last layout. It knows the view state it is handed, not the DOM or the run state.
 */
import { computeLayout, lanesInTurn } from "../canvas/layout.js";
import { legendEntries, legendTextWidth } from "../canvas/legend.js";
import { laneRows, legendFlags } from "../canvas/scene.js";

export function createLaneLayout() {
  let memo = { key: [], value: null };
  /** `width`: the canvas's CSS width; `ui`: main.js's view state; `clock`: the playback clock's name. */
  return function layoutOf(derived, axis, maxHeight, { width, ui, clock }) {
    const key = [derived, width, ui.view, clock, axis.from, axis.span, maxHeight, ui.present, ui.reveal, ui.laneFrom, ui.slo];
    if (key.every((k, i) => k === memo.key[i])) return memo.value;
    const workload = derived.run && derived.run.workload;
    const lanes = derived.drawn.map((l) => ({ name: l.name, title: l.title, rows: laneRows(l, ui.view, l.workload || workload),
      starts: l.timeline.starts, ends: l.timeline.ends, gaps: l.timeline.gaps, arrivals: derived.marks ? l.timeline.arrivals : null,
      kvBudget: l.kvBudget, preemptions: l.mayPreempt ? l.timeline.preemptions : null, load: Boolean(l.loads), positions: l.positions,
      split: Boolean(l.split), note: Boolean(l.placement) }));
    const px = ui.present ? 16 : 12;  // layout.js TYPE.legend
    const flags = legendFlags(derived, { view: ui.view, clock, slo: ui.slo });  // reveal: waits are possible, not seen
    const legend = { entries: legendEntries(ui.reveal ? { ...flags, waiting: derived.marks } : flags, px, ui.present),
      measure: (text) => legendTextWidth(text, px) };
    const opts = { view: ui.view, clock, domain: axis.span, from: axis.from, legend, maxHeight, present: ui.present };
    memo = { key, value: ui.present && maxHeight ? lanesInTurn(width, lanes, opts, ui.laneFrom) : computeLayout(width, lanes, opts) };
    return memo.value;
  };
}
