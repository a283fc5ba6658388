/**
 * The Live view's one loop. live/socket.js and the DOM listeners only queue; each animation frame drains both
 * queues into the live state (live/state.js) and the page's own bits (pause, the capture count, the capture's
 * answer), extrapolates the lane clock from its last anchor on the page's clock, and — only when something
 * changed (a step, a request, the window moving by a pixel, a second of the figures) — draws the canvas and
 * refreshes the panels and the probe (window.__live). Paused, the page keeps folding steps in but shows the
 * state and the time it had when paused.
 */
import { CAPTURE_DEFAULT, SECONDS_DEFAULT, captureCount, captureSeconds, fetchCapture, mainPageUrl } from "./capture.js";
import { liveFigures } from "./figures.js";
import { renderCapture, laneLine, renderEmpty, renderFigures, renderModel, renderOptions, renderRequests, setText,
  shownRequests } from "./panels.js";
import { exposeLiveProbe } from "./probe.js";
import { clockText, drawLive, liveLayout } from "./renderer.js";
import { liveScene } from "./scene.js";
import { connectLive } from "./socket.js";
import { LiveStatus, WINDOW_MS, applyLiveEvent, createLiveState, laneNow, needsWatch } from "./state.js";
import { sizeCanvas } from "../canvas/stage.js";
import { ConnectionEvent, ServerEvent, StopReason } from "../core/vocab.js";

const $ = (id) => document.getElementById(id);
const dom = {
  wrap: $("canvas-wrap"), canvas: $("lanes"), status: $("live-status"), follow: $("btn-follow"), empty: $("empty"),
  envLine: $("env-line"), curlLine: $("curl-line"), figures: $("figures"), options: $("lane-options"), rows: $("request-rows"),
  n: $("capture-n"), by: $("capture-by"), seconds: $("capture-s"), compress: $("capture-compress"), download: $("capture-download"), open: $("capture-open"), captureNote: $("capture-note"),
  workerPick: $("worker-pick"), worker: $("live-worker"),
  modelStatus: $("model-status"), modelText: $("model-text"), modelProgress: $("model-progress"),
};
const NOTHING = "No finished requests yet: nothing to capture. Send some traffic first (see above).";

const serverEvents = [];
const inputs = [];
const push = (action) => inputs.push(action);

let state = createLiveState();
// paused: {state, now} as they were when Pause was pressed (null: following); message: the answer to a capture click,
// {text, tone, finished}, shown while as many requests have finished as when it came
// capture: what a capture asks for (live/capture.js): {n, by, seconds, compress}
let ui = { paused: null, n: CAPTURE_DEFAULT, capture: { n: CAPTURE_DEFAULT, by: "requests", seconds: SECONDS_DEFAULT, compress: false },
  message: null, opening: false };
let resizes = 0;
let sizeKey = "";
let canvasKey = [];
let panelKey = [];
let shownPanels = null;   // what the panels show, for the probe
const rows = new Map();   // request id -> its <tr>

const socket = connectLive(serverEvents);
dom.follow.addEventListener("click", () => push({ type: "follow" }));
for (const node of [dom.n, dom.by, dom.seconds, dom.compress]) node.addEventListener("input", () => push({ type: "n" }));
dom.open.addEventListener("click", () => push({ type: "open" }));
dom.download.addEventListener("click", (e) => {
  if (dom.download.getAttribute("aria-disabled") !== "true") return;
  e.preventDefault();
  push({ type: "nothing" });
});
new ResizeObserver(() => push({ type: "resize" })).observe(dom.wrap);
dom.worker.addEventListener("change", () => push({ type: "worker", worker: dom.worker.value }));

const shownWorker = () => (state.lane && state.lane.worker) || null;

function onServer(event) {
  state = applyLiveEvent(state, event);
  if (event.type === ConnectionEvent.CONNECTED) socket.watch(shownWorker());  // the first join, or a rejoin
  if (event.type === ServerEvent.MODEL_STATUS && needsWatch(state)) socket.watch();  // the lane opened with the model
}

/** Scale-out: the engine workers' lanes to pick from (hidden in one process, where the snapshot names none). */
function renderWorkers() {
  const workers = (state.lane && state.lane.workers) || [];
  dom.workerPick.hidden = workers.length === 0;
  const names = workers.map((w) => w.worker);
  if (names.join("\n") !== [...dom.worker.options].map((o) => o.value).join("\n")) {
    dom.worker.replaceChildren(...names.map((n) => Object.assign(document.createElement("option"), { value: n, textContent: n })));
  }
  if (shownWorker()) dom.worker.value = shownWorker();
}

/** Finished requests a capture can hold (the server's rule: finished, not cancelled, some tokens). */
const finishedCount = (s) => s.requests
  .filter((q) => q.status === LiveStatus.FINISHED && q.stop !== StopReason.CANCELLED && q.tokens > 0).length;

function say(text, tone) {
  ui = { ...ui, message: { text, tone, finished: finishedCount(state) } };
}

function onInput(a, perfNow) {
  switch (a.type) {
    case "follow": ui = { ...ui, paused: ui.paused ? null : { state, now: laneNow(state, perfNow) } }; break;
    case "n": {
      const n = captureCount(dom.n.value);
      ui = { ...ui, n, message: null, capture: { n, by: dom.by.value === "seconds" ? "seconds" : "requests",
        seconds: captureSeconds(dom.seconds.value), compress: dom.compress.checked } };
      break;
    }
    case "nothing": say(NOTHING, "warn"); break;
    case "open":
      if (ui.opening) break;
      ui = { ...ui, opening: true };
      say("Fetching the capture\u2026", "");
      fetchCapture(ui.capture, push);
      break;
    case "captured":
      ui = { ...ui, opening: false };
      if (!a.workload.requests.length) {
        say(NOTHING, "warn");
        break;
      }
      say("Opening the main page\u2026", "");
      location.assign(mainPageUrl(a.workload));
      break;
    case "capture-failed":
      ui = { ...ui, opening: false };
      say(a.message, "error");
      break;
    case "worker": socket.watch(a.worker); break;   // its snapshot replaces the lane shown
    case "resize": resizes += 1; break;
    default: break;
  }
}

const changed = (key, last) => key.length !== last.length || key.some((k, i) => k !== last[i]);

function renderPanels(shown, following) {
  const s = shown.state;
  const figures = liveFigures(s, shown.now);
  renderModel(dom, state.model);
  renderWorkers();
  const pausedAt = following ? null : clockText(shown.now ?? 0, s.lane ? s.lane.startedAt : null);
  const [line, tone] = laneLine(state, figures, pausedAt);
  setText(dom.status, line);
  dom.status.dataset.tone = tone;
  setText(dom.follow, following ? "Pause" : "Follow");
  dom.follow.setAttribute("aria-pressed", String(!following));
  const figureText = renderFigures(dom.figures, figures);
  const optionText = renderOptions(dom.options, state.lane && state.lane.options);
  const requests = shownRequests(s.requests);
  const model = (state.lane && state.lane.model) || state.model.model;
  renderRequests(dom.rows, requests, rows, model === "simulator");
  renderEmpty(dom, state.requests.length === 0 && !state.error, model);
  const finished = finishedCount(state);
  const note = renderCapture(dom, ui.capture, finished, ui.message && ui.message.finished === finished ? ui.message : null);
  shownPanels = { figures, figureText, optionText, requests, empty: !dom.empty.hidden,
    capture: { n: ui.n, by: ui.capture.by, seconds: ui.capture.seconds, compress: ui.capture.compress, finished, note, download: dom.download.getAttribute("href"), opening: ui.opening } };
}

function frame(perfNow) {
  while (serverEvents.length) onServer(serverEvents.shift());
  while (inputs.length) onInput(inputs.shift(), perfNow);
  const following = !ui.paused;
  const shown = ui.paused || { state, now: laneNow(state, perfNow) };
  const now = shown.now ?? 0;
  const layout = liveLayout(dom.wrap.clientWidth, (state.lane && state.lane.slots) || 8);
  const pixel = Math.floor(now / (WINDOW_MS / layout.plot.w));
  const cKey = [shown.state, pixel, layout.width, layout.height, resizes];
  const pKey = [state, shown.state, Math.floor(now / 1000), ui, following];
  const drawCanvas = changed(cKey, canvasKey);
  const drawPanels = changed(pKey, panelKey);
  if (drawCanvas || drawPanels) {
    const s = shown.state;
    const scene = liveScene(s.records, s.requests, now - WINDOW_MS, now, layout.rows.length);
    if (drawCanvas) {
      canvasKey = cKey;
      sizeKey = sizeCanvas(dom.canvas, layout, sizeKey);
      drawLive(dom.canvas.getContext("2d"), scene, layout, { startedAt: s.lane ? s.lane.startedAt : null, following });
    }
    if (drawPanels) {
      panelKey = pKey;
      renderPanels(shown, following);
    }
    exposeLiveProbe({ state, shown, following, scene, layout, ...shownPanels });
  }
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
