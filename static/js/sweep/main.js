/**
 * The sweep page's one loop. sweep/socket.js and the DOM listeners only queue; each animation frame
 * drains both queues into the sweep state (sweep/state.js) and — only when something changed —
 * refreshes the status, the two uPlot charts, the table and the probe (window.__sweep). A sweep's id
 * goes into the URL (/sweep/<id>) as soon as it is queued, so a reload rejoins it with `watch`.
 */
import { decodeHash } from "../ui/mixurl.js";
import { createChart, syncChart } from "./chart.js";
import { createSweepForm } from "./form.js";
import { exposeSweepProbe } from "./probe.js";
import { connectSweep } from "./socket.js";
import { SweepAction, SweepEvent, SweepStatus, applySweepEvent, canCancel, createSweepState, seriesOf,
  whyNotSubmit } from "./state.js";
import { renderTable } from "./table.js";
import { renderView } from "./view.js";
import { ConnectionEvent, ServerEvent } from "../core/vocab.js";

const $ = (id) => document.getElementById(id);
const dom = {
  form: $("sweep-form"), source: $("source"), rates: $("rates"), n: $("n"), burstiness: $("burstiness"),
  sloTtft: $("slo-ttft"), sloTpot: $("slo-tpot"), laneChecks: $("lane-checks"), sourceNote: $("source-note"),
  run: $("run-sweep"), cancel: $("cancel-sweep"), costNote: $("cost-note"), generalError: $("general-error"),
  status: $("sweep-status"), mainLink: $("main-link"), homeLink: $("home-link"), progressRow: $("progress-row"),
  progress: $("sweep-progress"), progressText: $("progress-text"), charts: $("charts"), chartTtft: $("chart-ttft"),
  chartGoodput: $("chart-goodput"), ttftCaption: $("ttft-caption"), goodputCaption: $("goodput-caption"),
  backend: $("backend"), simBanner: $("simulated-banner"), groupNote: $("group-note"),
  table: $("points-table"), modelStatus: $("model-status"), modelText: $("model-text"), modelProgress: $("model-progress"),
};
const chartEmpty = (name) => document.querySelector(`.chart-empty[data-chart="${name}"]`);

const serverEvents = [];
const inputs = [];
const push = (action) => inputs.push(action);

let state = createSweepState();
let presets = null;   // the presets once GET /api/presets answered
let errors = [];      // [{field, message}] the form shows
let sent = null;      // the last sweep payload sent (its lanes number the server's lanes[i] errors)
let formVersion = 0;  // bumped by every edit of the form (the cost note follows it)
let resizes = 0;
let frameKey = [];
let tableKey = [];

const socket = connectSweep(serverEvents);
const form = createSweepForm(dom);
const pick = (rate) => push({ type: "pick", rate });
const charts = {
  ttft: createChart(dom.chartTtft, { yLabel: "p95 TTFT (ms)", format: (v) => `${Math.round(v).toLocaleString("en")} ms`,
    onPick: pick }),
  goodput: createChart(dom.chartGoodput, { yLabel: "goodput (req/s)", format: (v) => `${v.toFixed(2)} req/s`, onPick: pick }),
};

dom.form.addEventListener("submit", (e) => { e.preventDefault(); push({ type: "run" }); });
dom.form.addEventListener("input", () => push({ type: "form" }));
dom.form.addEventListener("change", () => push({ type: "form" }));
dom.cancel.addEventListener("click", () => push({ type: "cancel" }));
window.addEventListener("hashchange", () => push({ type: "hash" }));
new ResizeObserver(() => push({ type: "resize" })).observe(dom.charts);
fetch("/api/presets").then((r) => r.json()).then((body) => push({ type: "presets", presets: body.presets || [] }))
  .catch(() => push({ type: "presets", presets: [] }));
fetch("/api/limits").then((r) => r.json()).then((limits) => push({ type: "limits", limits })).catch(() => {});
if (document.body.dataset.runId) {
  state = applySweepEvent(state, { type: SweepAction.WATCHING, payload: { run_id: document.body.dataset.runId } });
}

const isLive = (s) => s && (s.status === SweepStatus.QUEUED || s.status === SweepStatus.RUNNING);

function showErrors(list) {
  errors = list;
  form.showErrors(errors, sent && sent.lanes);
}

function onServer(event) {
  const before = state.sweep;
  state = applySweepEvent(state, event);
  const s = state.sweep;
  if (event.type === ConnectionEvent.CONNECTED && isLive(s)) socket.watch(s.id);  // first join, or a rejoin
  if (event.type === ServerEvent.RUN_QUEUED && s && s.own && (!before || before.id !== s.id)) {
    history.replaceState(null, "", `/sweep/${encodeURIComponent(s.id)}${location.hash}`);  // a reload rejoins it
  }
  if (event.type === SweepEvent.SWEEP_STARTED && s && !s.own && s.workload && !(before && before.workload)) {
    form.loadSweep(s);  // a watched sweep: the form shows what it ran
    formVersion += 1;
  }
  if (event.type === ServerEvent.RUN_ERROR) {
    const ended = s && before && s.id === before.id && s.status !== before.status;  // the status line says it
    if (!ended) showErrors([{ field: event.payload.field || null, message: String(event.payload.message || "error") }]);
  }
}

function onInput(a) {
  switch (a.type) {
    case "presets":
      presets = a.presets;
      form.setSources(presets, decodeHash(location.hash));
      formVersion += 1;
      break;
    case "hash":
      if (presets) form.setSources(presets, decodeHash(location.hash));
      formVersion += 1;
      break;
    case "limits":
      dom.rates.title = `1 to ${a.limits.max_sweep_rates} request rates, in requests per second`;
      break;
    case "form":
      form.refresh();  // a new source shows its lanes, n and burstiness
      formVersion += 1;
      break;
    case "resize": resizes += 1; break;
    case "run": {
      const { payload, errors: found } = form.read();
      showErrors(found);
      if (found.length || whyNotSubmit(state)) break;
      sent = payload;
      socket.sweep(payload);
      state = applySweepEvent(state, { type: SweepAction.SUBMITTED, payload: null });
      break;
    }
    case "cancel":
      if (!canCancel(state)) break;
      socket.cancel(state.sweep.id);
      state = applySweepEvent(state, { type: SweepAction.CANCEL_SENT, payload: null });
      break;
    case "pick": {
      const point = state.sweep && state.sweep.points.find((p) => p.rate === a.rate);
      if (point && point.point_run_id) window.open(`/runs/${encodeURIComponent(point.point_run_id)}`, "_blank", "noopener");
      break;
    }
    default: break;
  }
}

function captions(s) {
  const slo = s ? s.slo : { ttft_ms: null, tpot_ms: null };
  const rules = [slo.ttft_ms !== null && `TTFT \u2264 ${slo.ttft_ms} ms`, slo.tpot_ms !== null && `TPOT \u2264 ${slo.tpot_ms} ms`]
    .filter(Boolean);
  const sim = s && s.simulated ? "SIMULATED \u00b7 " : "";
  const ttft = `${sim}p95 TTFT (ms) against request rate${slo.ttft_ms !== null ? " \u00b7 dashed: the TTFT SLO" : ""}`;
  const goodput = `${sim}goodput: requests/s ${rules.length ? `with ${rules.join(", ")}` : "finished (no SLO given)"}`;
  if (dom.ttftCaption.textContent !== ttft) dom.ttftCaption.textContent = ttft;
  if (dom.goodputCaption.textContent !== goodput) dom.goodputCaption.textContent = goodput;
}

function render() {
  const s = state.sweep;
  renderView(dom, state, form.summary());
  captions(s);
  syncChart(charts.ttft, seriesOf(s, "p95_ttft_ms"), s ? s.slo.ttft_ms : null);
  syncChart(charts.goodput, seriesOf(s, "request_goodput"));
  for (const name of Object.keys(charts)) chartEmpty(name).hidden = Boolean(charts[name].plot);
  const key = [s && s.points, s && s.lanes, s && s.simulated];
  if (!key.every((k, i) => k === tableKey[i])) {
    tableKey = key;
    renderTable(dom.table, s ? s.points : [], s ? s.lanes : [],
      "No points yet: each rate's rows appear when that rate has run on every lane.", Boolean(s && s.simulated));
  }
  dom.homeLink.href = `/${location.hash}`;  // back to the main page with the same mix
  if (!(s && s.notSweep)) dom.mainLink.href = dom.homeLink.href;
  exposeSweepProbe({ state, errors, charts, dom });
}

function frame() {
  while (serverEvents.length) onServer(serverEvents.shift());
  while (inputs.length) onInput(inputs.shift());
  const key = [state, formVersion, resizes, presets, errors];
  if (!key.every((k, i) => k === frameKey[i])) {
    frameKey = key;
    render();
  }
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
