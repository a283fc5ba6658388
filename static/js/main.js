/**
 * The page's one loop. socket.js and the DOM listeners only queue; each animation frame clamps dt,
 * drains both queues into the run state and the playback clock, sends what the state says must go
 * next (a submit, or a cancel that makes way for one: state.js), advances the clock, and — only when
 * something changed — lays out, draws the canvas and refreshes the panels. A link with a mix (#preset=,
 * #mix=) runs it once the model is ready. Tests read the result through window.__lanes (see probe.js).
 */
import { Input, bindControls, syncControls } from "./controls.js";
import { createEditor } from "./editor.js";
import * as exporter from "./exports.js";
import { computeLayout, hitTest, markX, timeX } from "./layout.js";
import { legendEntries, legendTextWidth } from "./legend.js";
import { decodeHash, encodeMix, writeUrl } from "./mixurl.js";
import { isTimed } from "./metrics.js";
import { narrate, startLine } from "./narration.js";
import { holdHeight, renderMetrics, renderRequests, renderTooltip, rowNote, setText, tooltipParts } from "./panels.js";
import * as playback from "./playback.js";
import { exposeProbe } from "./probe.js";
import { cellAt, draw } from "./renderer.js";
import { buildScene, deriveRun, laneRows, legendFlags, nextDomain } from "./scene.js";
import { connect } from "./socket.js";
import { Action, applyEvent, createState, isLive, nextSend } from "./state.js";
import { ConnectionEvent, RunStatus, ServerEvent } from "./vocab.js";
import { renderPresets, renderStatus } from "./status.js";

const $ = (id) => document.getElementById(id);
const dom = {
  wrap: $("canvas-wrap"), canvas: $("lanes"), empty: $("empty"), tooltip: $("tooltip"), narration: $("narration"),
  btnStart: $("btn-start"), btnBack: $("btn-back"), btnPlay: $("btn-play"), btnFwd: $("btn-fwd"), btnEnd: $("btn-end"),
  btnHelp: $("btn-help"), helpClose: $("help-close"), help: $("help"), scrub: $("scrub"), readout: $("readout"),
  speed: $("speed"), requestLane: $("request-lane"), requestRows: $("request-rows"), metricsTable: $("metrics-table"),
  metricsCheck: $("metrics-check"), editorDetails: $("editor-details"), presetButtons: $("preset-buttons"),
  lesson: $("lesson"), runStatus: $("run-status"), runLink: $("run-link"), modelStatus: $("model-status"),
  modelText: $("model-text"), modelProgress: $("model-progress"), stage: document.querySelector(".stage"),
  exports: { png: $("export-png"), json: $("export-json"), csv: $("export-csv"), trace: $("export-trace") },
};

const serverEvents = [];
const inputs = [];
const push = (action) => inputs.push(action);
const reducedMotion = matchMedia("(prefers-reduced-motion: reduce)");

let state = createState();
let pb = playback.createPlayback();
// intro: nothing chosen yet (no preset, link, edit or run); link: the name of a link's mix that runs by itself
let ui = { view: "slots", hover: null, help: false, requestLane: null, preset: null, intro: true, link: null };
let presets = [];
let domain = null;
let frameKey = [];
let panelKey = [];
let canvasSize = "";
let resizes = 0;
let tooltipKey = "";
const missingRun = document.body.dataset.missingRun || "";  // /runs/<an id the server does not know>

const socket = connect(serverEvents);
const editor = createEditor($("editor"), { onChange: () => push({ type: "mix-changed" }), onRun: () => push({ type: "run" }),
  onGenerate: (spec) => push({ type: "generate", spec }) });
dom.runMix = $("run-mix");
bindControls(dom, push);
dom.presetButtons.addEventListener("click", (e) => {
  const button = e.target.closest("button[data-preset]");
  if (button) push({ type: "preset", name: button.dataset.preset });
});
for (const [kind, button] of Object.entries(dom.exports)) button.addEventListener("click", () => push({ type: "export", kind }));
reducedMotion.addEventListener("change", () => push({ type: Input.RESIZE }));
fetch("/api/presets").then((r) => r.json()).then((body) => push({ type: "presets", presets: body.presets || [] }))
  .catch(() => push({ type: "presets", presets: [] }));
fetch("/api/limits").then((r) => r.json()).then((limits) => push({ type: "limits", limits })).catch(() => {});
if (document.body.dataset.runId) state = applyEvent(state, { type: Action.WATCHING, payload: { run_id: document.body.dataset.runId } });

let clockMemo = { key: [], value: null };
/** How far the playhead may go, where ±1 lands, and whether more can arrive: once per (run, clock). */
function clockInfo(derived) {
  const key = [derived, pb.clock];
  if (key.every((k, i) => k === clockMemo.key[i])) return clockMemo.value;
  const lanes = derived.lanes.map((l) => ({ end: l.timeline.end, starts: l.timeline.starts, done: l.done }));
  clockMemo = { key, value: { limit: playback.extent(lanes, pb.clock), edges: playback.boundaries(lanes, pb.clock),
    finished: Boolean(derived.run && derived.run.status === RunStatus.FINISHED) } };
  return clockMemo.value;
}

/** Ask to run the editor's mix; it goes out when it can (nextSend). False when the editor shows errors instead. */
function want() {
  const { workload, errors } = editor.read();
  editor.showErrors(errors);
  if (errors.length) { dom.editorDetails.open = true; return false; }
  state = applyEvent(state, { type: Action.WANTED, payload: { workload, lanes: workload.lanes } });
  return true;
}

/** Send what the state says must go next: a submit, or a cancel of our live run that stands in its way. */
function sendWhatIsNext() {
  const next = nextSend(state);
  if (!next) return;
  if (next.type === "cancel") {
    socket.cancel(next.runId);
    state = applyEvent(state, { type: Action.CANCELLING, payload: { run_id: next.runId } });
  } else {
    socket.submit(next.workload, next.lanes);
    state = applyEvent(state, { type: Action.SUBMITTED, payload: null });
  }
}

function onServer(event) {
  const before = state.run;
  state = applyEvent(state, event);
  const run = state.run;
  if (event.type === ConnectionEvent.CONNECTED && run && run.id && isLive(run)) socket.watch(run.id);  // rejoin
  const started = event.type === ServerEvent.RUN_STARTED && run && run.id === event.payload.run_id;
  if (started && (!before || before.id !== run.id || !before.workload)) {
    // arrivals in ms happen on the lanes' clocks: the steps clock would hide every wait, so such a run opens on ms
    pb = { ...pb, t: 0, playing: true, clock: isTimed(run.workload) ? "ms" : pb.clock };
    ui = { ...ui, requestLane: null, link: null, intro: false };
    if (!run.own) {  // a shared link or a replay: show its mix in the editor
      editor.load(run.workload);
      writeUrl(location.pathname, encodeMix({ workload: run.workload }));
    }
    const path = `/runs/${encodeURIComponent(run.id)}`;  // a link that replays this run
    writeUrl(path, location.hash.slice(1));
    dom.runLink.href = `${path}${location.hash}`;
  }
  if (event.type === ServerEvent.RUN_ERROR && !state.next && !state.pending) ui = { ...ui, link: null };
  if (event.type === ServerEvent.RUN_ERROR && state.error) {
    const { field, message } = state.error;  // a field of the mix is marked in the editor; the rest shows above the lanes
    editor.showErrors(editor.has(field) ? [{ field, message }] : []);
    if (editor.has(field)) dom.editorDetails.open = true;
  }
}

/** Load the link's mix into the editor, and run it: a shared link is meant to be watched. No mix: the first preset, unpressed. */
function loadFromHash(run) {
  const found = decodeHash(location.hash);
  const linked = presets.find((p) => p.name === (found && found.preset));
  const preset = linked || presets[0];
  if (found && found.mix) {
    const { workload, lanes, generate } = found.mix;
    editor.load(workload.lanes || !lanes ? workload : { ...workload, lanes }, generate);
    ui = { ...ui, preset: null };
  } else if (preset) {
    editor.load(preset, preset.generate);
    ui = { ...ui, preset: linked ? preset.name : null };
  }
  if (run && ((found && found.mix) || linked)) {
    ui = { ...ui, intro: false, link: editor.meta.name };
    want();
  }
}

/** The playhead for a click or tap at canvas x: the end of the step under it on the step clock. */
function seekTo(x, derived, limit) {
  if (!derived.lanes.length) return;
  const layout = layoutOf(derived);
  let t = (x - layout.axis.x) / layout.pxPerUnit;
  if (pb.clock === "steps") t = Math.ceil(t);
  pb = playback.seek({ ...pb, playing: false }, t, limit);
}

function onInput(a, derived) {
  const { limit, edges, finished } = clockInfo(derived);
  switch (a.type) {
    case "presets":
      presets = a.presets;
      renderPresets(dom.presetButtons, presets);
      if (!document.body.dataset.runId) loadFromHash(!missingRun);  // a /runs/<id> page shows its run's mix instead
      break;
    case "limits": editor.setLimits(a.limits); break;
    case "preset": {
      const preset = presets.find((p) => p.name === a.name);
      if (!preset) break;
      editor.load(preset, preset.generate);
      ui = { ...ui, preset: preset.name, intro: false, link: null };
      writeUrl("/", `preset=${encodeURIComponent(preset.name)}`);
      want();
      break;
    }
    case "mix-changed": {
      const { workload, generate } = editor.read();
      ui = { ...ui, preset: null, intro: false, link: null };
      writeUrl("/", encodeMix({ workload, generate }));
      break;
    }
    case "generate": generate(a.spec); break;
    case "generated":
      if (a.requests) editor.fillRequests(a.requests);
      else editor.showErrors([{ field: a.field || "generate", message: a.message }]);
      break;
    case "run":  // the button sits in the editor, below the lanes: bring the lanes into view to watch the run
      ui = { ...ui, intro: false, link: null };
      if (want()) dom.stage.scrollIntoView({ behavior: reducedMotion.matches ? "auto" : "smooth", block: "start" });
      break;
    case "export": {
      const run = state.run;
      if (!run || !run.workload) break;
      if (a.kind === "png") exporter.exportPng(dom.canvas, run);
      else if (a.kind === "json") exporter.exportRecords(run);
      else if (a.kind === "csv") exporter.exportCsv(run, derived.metrics);
      else exporter.exportTrace(run);
      break;
    }
    case Input.PLAY: pb = playback.togglePlay(pb, limit, finished); break;
    case Input.STEP: pb = playback.stepBy(pb, a.delta, edges); break;
    case Input.START: pb = { ...pb, playing: false, t: 0 }; break;
    case Input.END: pb = { ...pb, playing: false, t: limit }; break;
    case Input.SEEK:
      if (a.x !== undefined) seekTo(a.x, derived, limit);  // a mouse click on the canvas
      else pb = playback.seek({ ...pb, playing: false }, a.t, limit);
      break;
    case Input.TAP:  // a touch: the tooltip of what it touched; only the time axis seeks
      if (derived.lanes.length && a.y < layoutOf(derived).axis.h) seekTo(a.x, derived, limit);
      else ui = { ...ui, hover: { x: a.x, y: a.y } };
      break;
    case Input.SPEED: pb = playback.changeSpeed(pb, a.delta); break;
    case Input.SET_SPEED: pb = { ...pb, speed: a.speed }; break;
    case Input.CLOCK: {
      const longest = derived.lanes.reduce((best, l) => (!best || l.records.length > best.records.length ? l : best), null);
      pb = playback.switchClock(pb, a.clock, longest && longest.timeline);
      break;
    }
    case Input.VIEW: ui = { ...ui, view: a.view }; break;
    case Input.HELP: ui = { ...ui, help: a.close ? false : !ui.help }; break;
    case Input.HOVER: ui = { ...ui, hover: a.x === null ? null : { x: a.x, y: a.y } }; break;
    case Input.REQUEST_LANE: ui = { ...ui, requestLane: a.lane }; break;
    case Input.RESIZE: canvasSize = ""; resizes += 1; break;
    default: break;
  }
}

let layoutMemo = { key: [], value: null };
function layoutOf(derived) {
  const width = dom.wrap.clientWidth;
  const key = [derived, width, ui.view, pb.clock, domain];
  if (key.every((k, i) => k === layoutMemo.key[i])) return layoutMemo.value;
  const lanes = derived.lanes.map((l) => ({ name: l.name, title: l.title, rows: laneRows(l, ui.view, derived.run.workload),
    starts: l.timeline.starts, ends: l.timeline.ends, gaps: l.timeline.gaps, arrivals: derived.marks ? l.timeline.arrivals : null }));
  const span = !domain ? 1 : pb.clock === "steps" ? domain.steps : domain.ms;
  const legend = { entries: legendEntries(legendFlags(derived, { view: ui.view, clock: pb.clock })), measure: legendTextWidth };
  layoutMemo = { key, value: computeLayout(width, lanes, { view: ui.view, clock: pb.clock, domain: span, legend }) };
  return layoutMemo.value;
}

function sizeCanvas(layout) {
  const dpr = window.devicePixelRatio || 1;
  const size = `${layout.width}x${layout.height}@${dpr}`;
  if (size === canvasSize) return;
  canvasSize = size;
  dom.canvas.style.width = `${layout.width}px`;
  dom.canvas.style.height = `${layout.height}px`;
  dom.canvas.width = Math.round(layout.width * dpr);
  dom.canvas.height = Math.round(layout.height * dpr);
  dom.canvas.getContext("2d").setTransform(dpr, 0, 0, dpr, 0, 0);
}

/** What the pointer is over, up to the playhead: {lane, hit, focus} for a cell, a wait or arrival marks; or null. */
function hovered(layout, scene) {
  if (!ui.hover) return null;
  const hit = hitTest(layout, ui.hover.x, ui.hover.y);
  const lane = hit && scene.lanes.find((l) => l.name === hit.lane);
  if (!lane || ui.hover.x > timeX(layout, scene.t)) return null;
  if (hit.kind === "mark") {
    const marks = hit.marks.filter((m) => markX(layout, m) <= timeX(layout, scene.t));
    return marks.length ? { lane, hit: { ...hit, marks }, focus: marks.length === 1 ? marks[0].id : null } : null;
  }
  if (hit.kind === "gap") return hit.gap.step <= lane.records.length ? { lane, hit, focus: null } : null;
  if (hit.step > lane.revealed) return null;
  const what = cellAt(lane, scene.view, hit.step, hit.row);
  return what ? { lane, hit: { ...hit, what }, focus: what.request } : null;
}

/** Ask the server for the requests an arrival process draws; the answer comes back through the input queue. */
function generate(spec) {
  fetch("/api/generate", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(spec) })
    .then((r) => r.json().then((body) => push(r.ok ? { type: "generated", requests: body.requests || [] }
      : { type: "generated", field: body.field, message: String(body.error || "could not generate") })))
    .catch(() => push({ type: "generated", field: "generate", message: "could not reach the server" }));
}

function render() {
  const derived = deriveRun(state.run);
  domain = nextDomain(derived, domain);
  const { limit, edges } = clockInfo(derived);
  const shown = playback.shownTime(pb, reducedMotion.matches, edges);
  const layout = layoutOf(derived);
  dom.canvas.hidden = !derived.lanes.length;
  dom.empty.hidden = Boolean(derived.lanes.length);
  let scene = buildScene(derived, { view: ui.view, clock: pb.clock, t: shown, focus: null });
  const hover = hovered(layout, scene);
  if (hover && hover.focus) scene = { ...scene, focus: hover.focus };
  if (derived.lanes.length) {
    sizeCanvas(layout);
    draw(dom.canvas.getContext("2d"), scene, layout);
  }
  dom.tooltip.hidden = !hover;
  if (hover) showTooltip(hover, layout, derived);
  const streaming = Boolean(state.run && state.run.status === RunStatus.RUNNING);
  const narration = (!derived.lanes.length && startLine({ missingRun, linkMix: ui.link, ready: state.model.ready }))
    || narrate(scene.lanes.map((l) => ({ name: l.name, policy: l.policy, records: l.records, step: l.step,
      gap: l.gap, arrivals: l.timeline.arrivals })), pb.clock, shown, streaming, derived.timed);
  setText(dom.narration, narration);
  holdHeight(dom.narration, `${state.run ? state.run.id : ""}|${dom.wrap.clientWidth}`);
  syncControls(dom, pb, limit, derived.lanes.length > 0);
  dom.help.hidden = !ui.help;
  renderStatus(dom, state, { presetName: ui.preset, presets, mix: editor.meta, derived, intro: ui.intro, missingRun });
  for (const button of Object.values(dom.exports)) button.disabled = !derived.lanes.length;
  refreshPanels(derived, scene, shown, limit);
  exposeProbe({ state, pb, ui, derived, layout, scene, shown, limit, narration, canvas: dom.canvas });
}

/** The tooltip of what the pointer (or a tap) is over; rebuilt and placed only when that or the pointer changes. */
function showTooltip(hover, layout, derived) {
  const { hit } = hover;
  const key = [hover.lane.name, hit.kind, hit.step, hit.row, hit.gap && hit.gap.step, (hit.marks || []).map((m) => m.id).join(),
    ui.view, derived.run && derived.run.id, ui.hover.x, ui.hover.y, layout.width, layout.height].join("|");
  if (key === tooltipKey) return;
  tooltipKey = key;
  renderTooltip(dom.tooltip, tooltipParts(hover.lane, hit, ui.view, derived.run.workload));
  dom.tooltip.style.left = `${Math.max(0, Math.min(ui.hover.x + 14, layout.width - 260))}px`;
  const below = ui.hover.y + 16;
  const h = dom.tooltip.offsetHeight;  // the canvas clips it: near the bottom it opens above the pointer
  dom.tooltip.style.top = `${below + h > layout.height ? Math.max(0, ui.hover.y - h - 10) : below}px`;
}

function refreshPanels(derived, scene, shown, limit) {
  const lanes = derived.lanes.map((l) => l.name);
  const lane = lanes.includes(ui.requestLane) ? ui.requestLane : lanes[lanes.length - 1];
  const current = scene.lanes.find((l) => l.name === lane);
  // the playhead is "at the end" when every lane shows its last step so far: the table is then the run's numbers
  const atEnd = scene.lanes.every((l) => l.step >= l.records.length) && shown >= limit - 1e-9;
  const at = atEnd ? null : pb.clock === "steps" ? `step ${Math.ceil(shown - 1e-9)}` : `${(shown / 1000).toFixed(2)} s`;
  const key = [derived.run, derived.check, lane, scene.lanes.map((l) => l.step).join(), at];
  if (key.every((k, i) => k === panelKey[i])) return;
  panelKey = key;
  const metrics = Object.fromEntries(scene.lanes.map((l) => [l.name, l.metrics]));
  const notes = Object.fromEntries(scene.lanes.map((l) => [l.name, rowNote(l)]));
  renderMetrics(dom.metricsTable, dom.metricsCheck, metrics, notes, derived.check, at);
  if (dom.requestLane.options.length !== lanes.length || [...dom.requestLane.options].some((o, i) => o.value !== lanes[i])) {
    dom.requestLane.replaceChildren(...lanes.map((name) => new Option(name, name)));
  }
  if (lane) dom.requestLane.value = lane;
  if (current) renderRequests(dom.requestRows, derived.run.workload, current.records, derived.metrics[lane], current.step);
  else dom.requestRows.replaceChildren();
}

let lastTime = performance.now();
function frame(now) {
  const dt = Math.min(0.1, Math.max(0, (now - lastTime) / 1000));  // a background tab must not jump the clock
  lastTime = now;
  while (serverEvents.length) onServer(serverEvents.shift());
  let derived = deriveRun(state.run);
  while (inputs.length) { onInput(inputs.shift(), derived); derived = deriveRun(state.run); }
  sendWhatIsNext();
  const { limit, finished } = clockInfo(derived);
  pb = playback.advance(pb, dt, limit, finished);
  const key = [state, pb, ui, dom.wrap.clientWidth, resizes];
  if (!key.every((k, i) => k === frameKey[i])) {
    frameKey = key;
    render();
  }
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
