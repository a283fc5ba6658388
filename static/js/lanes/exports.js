/**
 * Exports, all built from the run's step records: the lanes as PNG, the records as JSON, the
 * metrics as CSV, and a Chrome trace-event file (open it in Perfetto or chrome://tracing) with one
 * process per lane and one thread per slot, each step a slice placed at its lane-clock start and as
 * long as it lasted, plus a "lane" thread with the lane's waits for arrivals. Lanes are keyed by name.
 */
import { orderLanes } from "../core/laneconfig.js";
import { METRIC_KEYS, laneTimes } from "../core/metrics.js";
import { Forward, SlotState } from "../core/vocab.js";

function download(filename, blob) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

function baseName(run) {
  const name = String((run.workload && run.workload.name) || "run").replace(/[^A-Za-z0-9_-]+/g, "-");
  return `batch-lanes-${name}-${String(run.id).replace(/[^A-Za-z0-9_-]+/g, "")}`;
}

export function exportPng(canvas, run) {
  canvas.toBlob((blob) => blob && download(`${baseName(run)}.png`, blob), "image/png");
}

export function recordsJson(run) {
  return JSON.stringify({ run_id: run.id, model: run.model, lanes: run.lanes, workload: run.workload,
    records: run.records, metrics: run.serverMetrics }, null, 1);
}

export function exportRecords(run) {
  download(`${baseName(run)}-records.json`, new Blob([recordsJson(run)], { type: "application/json" }));
}

function csvCell(value) {
  const s = value === null || value === undefined ? "" : String(value);
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** Raw numbers (not the table's rounded text), one row per lane. */
export function metricsCsv(metrics) {
  const lines = [["lane", ...METRIC_KEYS].join(",")];
  for (const [lane, m] of Object.entries(metrics)) lines.push([lane, ...METRIC_KEYS.map((k) => m[k])].map(csvCell).join(","));
  return `${lines.join("\n")}\n`;
}

export function exportCsv(run, metrics) {
  download(`${baseName(run)}-metrics.csv`, new Blob([metricsCsv(metrics)], { type: "text/csv" }));
}

/**
 * Chrome trace-event JSON: pid = lane (in page order), tid = slot (tid 0: the lane's waits), "X" slices in
 * microseconds, a KV counter.
 */
export function chromeTrace(run) {
  const events = [];
  orderLanes(run.lanes, run.laneConfigs).forEach((lane, li) => {
    const pid = li + 1;
    const records = run.records[lane] || [];
    const { starts, ends } = laneTimes(records);
    events.push({ ph: "M", pid, name: "process_name", args: { name: `${lane} lane` } });
    events.push({ ph: "M", pid, name: "process_sort_index", args: { sort_index: li } });
    const slots = records.length ? records[0].slots.length : 0;
    for (let s = 0; s < slots; s += 1) {
      events.push({ ph: "M", pid, tid: s + 1, name: "thread_name", args: { name: `slot ${s + 1}` } });
    }
    let waits = 0;  // a "waiting" thread only for a lane that waited
    const wait = (from, to, step) => {
      if (!waits++) events.push({ ph: "M", pid, tid: 0, name: "thread_name", args: { name: "waiting" } });
      events.push({ ph: "X", pid, tid: 0, ts: from * 1000, dur: (to - from) * 1000, name: "waiting for arrivals",
        cat: "waiting", args: { step } });
    };
    records.forEach((r, i) => {
      const ts = starts[i] * 1000;
      const prevEnd = i ? ends[i - 1] : 0;
      if (starts[i] > prevEnd + 1e-6) wait(prevEnd, starts[i], r.step);  // the lane's clock jumped to an arrival
      if (r.forward === Forward.NONE) wait(starts[i], ends[i], r.step);         // a step that computed nothing
      r.slots.forEach((c, s) => {
        if (c.state === SlotState.IDLE) return;
        events.push({ ph: "X", pid, tid: s + 1, ts, dur: r.ms * 1000, name: `${c.request} ${c.state}`,
          cat: c.state, args: { step: r.step, request: c.request, token: c.token, token_id: c.token_id,
            ...(c.tokens ? { tokens: c.tokens } : {}), ...(c.proposed !== undefined ? { proposed: c.proposed, accepted: c.accepted } : {}),
            prefill: c.prefill || null, stop: c.stop || null } });
      });
      events.push({ ph: "C", pid, ts, name: "KV in use",
        args: r.kv_blocks_total > 0 ? { blocks: r.kv_blocks_used } : { tokens: r.kv_used } });
    });
  });
  return { traceEvents: events, displayTimeUnit: "ms", otherData: { run_id: run.id, model: run.model } };
}

export function exportTrace(run) {
  download(`${baseName(run)}-trace.json`, new Blob([JSON.stringify(chromeTrace(run))], { type: "application/json" }));
}
