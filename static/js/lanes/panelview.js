/**
 * The panels as the loop refreshes them each frame: the metrics table and the requests table (what they cover at
 * the playhead, which lane's requests show) and the hover tooltip, each rebuilt only when what it shows changed.
 * panels.js builds the DOM; this module decides when and with what. It never touches the run state, the
 * playback clock or the canvas: main.js hands it what the frame computed.
 */
import { renderMetrics, renderRequests, renderTooltip, rowNote, tooltipParts } from "../ui/panels.js";
import { renderPdTable } from "../ui/pdtable.js";
import { laneRevealed } from "./reveal.js";
import { legendFlags } from "../canvas/scene.js";
import { placeTooltip } from "../canvas/stage.js";

export function createPanelView(dom) {
  let panelKey = [];
  let tooltipKey = "";

  /** The tables for this frame: `view` {clock, view, reveal, requestLane} is what the page shows. */
  function refresh(derived, scene, shown, limit, { clock, view, reveal, requestLane }) {
    // the requests table's lanes: the run's, each fleet followed by its replicas ("<fleet>/<i>", its own requests)
    const lanes = derived.lanes.flatMap((l) => [l.name, ...(derived.drawn || []).filter((d) => d.fleet === l.name).map((d) => d.name)]);
    const lane = lanes.includes(requestLane) ? requestLane : derived.lanes.length ? derived.lanes[derived.lanes.length - 1].name : undefined;
    const rows = scene.rows || scene.lanes;  // the run's lanes (a fleet one row), not the sub-lanes drawn
    const current = rows.find((l) => l.name === lane) || scene.lanes.find((l) => l.name === lane);
    // the playhead is "at the end" when every lane shows its last step so far: the table is then the run's numbers
    const atEnd = rows.every((l) => l.step >= l.records.length) && shown >= limit - 1e-9;
    const at = atEnd ? null : clock === "steps" ? `step ${Math.ceil(shown - 1e-9)}` : `${(shown / 1000).toFixed(2)} s`;
    const hidden = Object.fromEntries(rows.map((l) => [l.name, Boolean(reveal && !laneRevealed(l))]));
    const key = [derived.run, derived.check, lane, rows.map((l) => l.step).join(), current && current.step, at, Object.values(hidden).join(),
      JSON.stringify(scene.sloTargets)];  // the teacher's SLO targets change the goodput and met columns
    if (key.every((k, i) => k === panelKey[i])) return;
    panelKey = key;
    const metrics = Object.fromEntries(rows.map((l) => [l.name, l.metrics]));
    const notes = Object.fromEntries(rows.map((l) => [l.name, hidden[l.name] ? "predict first" : rowNote(l)]));
    renderMetrics(dom.metricsTable, dom.metricsCheck, metrics, notes, derived.check, at, hidden,
      legendFlags(derived, { view, clock }).speculative);
    renderPdTable(document.getElementById("pd-table"), metrics, hidden);  // a P/D lane's ITL, copies and TTFT parts
    if (dom.requestLane.options.length !== lanes.length || [...dom.requestLane.options].some((o, i) => o.value !== lanes[i])) {
      dom.requestLane.replaceChildren(...lanes.map((name) => {
        const replica = (derived.drawn || []).find((d) => d.name === name && d.fleet !== undefined);
        const which = replica && replica.pd ? `${replica.pd.role} engine ${replica.pd.index + 1}` : replica && `replica ${replica.replica + 1}`;
        return new Option(replica ? `${replica.fleet} \u00b7 ${which}` : name, name);
      }));
    }
    if (lane) dom.requestLane.value = lane;
    if (current) {  // a replica: its own requests, records and metrics (scene.js replicaLanes)
      renderRequests(dom.requestRows, current.workload || derived.run.workload, current.records, current.whole || derived.metrics[lane],
        current.step, reveal);
    }
    else dom.requestRows.replaceChildren();
  }

  /** The tooltip of what the pointer (or a tap) `point` is over; rebuilt and placed only when that or the pointer changes. */
  function tooltip(hover, point, layout, derived, view) {
    const { hit } = hover;
    const key = [hover.lane.name, hit.kind, hit.step, hit.row, hit.gap && hit.gap.step, (hit.marks || []).map((m) => m.id).join(),
      view, derived.run && derived.run.id, point.x, point.y, layout.width, layout.height, JSON.stringify(hover.lane.slo)].join("|");
    if (key === tooltipKey) return;
    tooltipKey = key;
    renderTooltip(dom.tooltip, tooltipParts(hover.lane, hit, view, derived.run.workload));
    placeTooltip(dom.tooltip, point, layout);
  }
  return { refresh, tooltip };
}
