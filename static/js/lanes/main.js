/**
 * The page's one loop. socket.js and the DOM listeners only queue; each animation frame clamps dt,
 * drains both queues into the run state, the playback clock and the view state (teach.js: presenter
 * mode, predict-then-reveal, zoom), sends what the state says must go next (a submit, or a cancel that
 * makes way for one: state.js), advances the clock, and — only when something changed — lays out,
 * draws the canvas and refreshes the panels. A link with a mix (#preset=, #mix=) runs it once the
 * model is ready. Widgets that never touch the run (the glossary's tips, sharing, the editor's token
 * counts) keep their own listeners. Tests read the result through window.__lanes (see probe.js).
 */
import { requestGenerated } from "./arrivalpanel.js";
import { Input, bindControls, syncControls } from "../ui/controls.js";
import { createEditor } from "./editor.js";
import * as exporter from "./exports.js";
import { nextTurn, timeAt } from "../canvas/layout.js";
import { createLaneLayout } from "./lanelayout.js";
import { placeLegendKeys } from "./legendkeys.js";
import { decodeHash, encodeMix, writeUrl } from "../ui/mixurl.js";
import { isTimed } from "../core/metrics.js";
import { narrate, startLine } from "./narration.js";
import { holdHeight, setText } from "../ui/panels.js";
import { createPanelView } from "./panelview.js";
import * as playback from "../core/playback.js";
import { TURN, bindPresent, syncPresent } from "./present.js";
import { exposeProbe } from "./probe.js";
import { draw } from "../canvas/renderer.js";
import { allRevealed, maskScene, revealSpan } from "./reveal.js";
import { buildScene, deriveRun, nextDomain } from "../canvas/scene.js";
import { createClass } from "./class.js";
import { createShare } from "./share.js";
import { connect } from "../ui/socket.js";
import { hovered, placeZoomBand, presenterBudget, sizeCanvas } from "../canvas/stage.js";
import { Action, applyEvent, createState, isLive, nextSend } from "./state.js";
import { ConnectionEvent, RunStatus, ServerEvent } from "../core/vocab.js";
import { presetProblem, renderPresets, renderStatus } from "./status.js";
import { renderNoise, renderTagline } from "./noise.js";
import { createReferences } from "./reference.js";
import { applyTeach, syncTeach } from "./teach.js";
import { bindGlossary } from "../ui/tips.js";
import { createTokenCount } from "./tokencount.js";
import { MEMORY, bindMemory, showMemory } from "./memmap-view.js";
import { showPipelines } from "./pipeline-view.js";
import { followZoom, viewOf } from "./zoom.js";
import { SLO, createSloTargets } from "./slotargets.js";
import { createSubmits } from "./submits.js";
import { $, pageDom } from "./pagedom.js";

const dom = pageDom();
const serverEvents = [], inputs = [];
const push = (action) => inputs.push(action);
const references = createReferences($("references"), { runPreset: (name) => push({ type: "preset", name }),
  member: () => ({ role: klass.role, credentials: klass.credentials() }) });
const submits = createSubmits();
const layoutOf = createLaneLayout();
const reducedMotion = matchMedia("(prefers-reduced-motion: reduce)");

let state = createState();
let pb = playback.createPlayback();
// intro: nothing chosen yet (no preset, link, edit or run); link: the name of a link's mix that runs by itself;
// present, reveal, zoom, drag: teach.js
let ui = { view: "slots", hover: null, help: false, requestLane: null, preset: null, intro: true, link: null,
  present: false, reveal: false, zoom: null, drag: null, laneFrom: 0,  // laneFrom: presenter mode's first lane shown
  memory: false, slo: null };  // memory: the memory map in place of the lanes (memmap-view.js); slo: the teacher's targets
let presets = [];
let promptLimit = Infinity;  // the server's max_prompt_chars once /api/limits answers
let domain = null;
let shownAxis = { full: 1, from: 0, span: 1 };  // the x-axis the last frame drew (before and after any zoom)
let shownLayout = null;
let frameKey = [];
let canvasSize = "";
let resizes = 0;
let refitFrom = null;  // presenter mode: the budget the last layout had when the text above it outgrew it
const missingRun = document.body.dataset.missingRun || "";  // /runs/<an id the server does not know>
const classPage = Boolean(document.body.dataset.classCode);  // /c/<code>: its address stays the class's link

const socket = connect(serverEvents);
const editor = createEditor($("editor"), { onChange: () => push({ type: "mix-changed" }), onRun: () => push({ type: "run" }),
  onGenerate: (spec) => push({ type: "generate", spec }) });
const panels = createPanelView(dom);  // the tables and the tooltip, rebuilt when what they show changed
const sloTargets = createSloTargets($("slo-targets"), push);  // the SLO's targets, the run's or the teacher's
bindControls(dom, push);
bindPresent(dom, push);  // presenter mode's lane pager
bindMemory($("btn-memory"), push);
dom.presetButtons.addEventListener("click", (e) => {
  const button = e.target.closest("button[data-preset]");
  if (button) push({ type: "preset", name: button.dataset.preset });
});
dom.presetPick.addEventListener("change", () => {
  if (dom.presetPick.value) push({ type: "preset", name: dom.presetPick.value });
  dom.presetPick.blur();  // the arrow keys step the run again, rather than pick another preset
});
const share = createShare({ link: dom.runLink, qrButton: $("btn-qr"), status: $("share-status"), popover: $("qr-popover"),
  frame: $("qr-frame"), url: $("qr-url"), close: $("qr-close") });
const klass = createClass($("class-bar"), { send: socket.send, code: document.body.dataset.classCode || "", poll: $("poll"),
  missing: document.body.dataset.missingClass || "", onShowMine: () => push({ type: "show-mine" }),
  onShowTeacher: (runId) => push({ type: "show-teacher", runId }) });
Object.defineProperty(window, "__class", { get: () => klass.info });  // what the class's browser tests read
bindGlossary(document, $("glossary-tip"));
createTokenCount($("editor"), { maxChars: () => promptLimit });
for (const [kind, button] of Object.entries(dom.exports)) button.addEventListener("click", () => push({ type: "export", kind }));
reducedMotion.addEventListener("change", () => push({ type: Input.RESIZE }));
fetch("/api/presets").then((r) => r.json()).then((body) => push({ type: "presets", presets: body.presets || [] }))
  .catch(() => push({ type: "presets", presets: [] }));
fetch("/api/limits").then((r) => r.json()).then((limits) => push({ type: "limits", limits })).catch(() => {});
if (document.body.dataset.runId) state = applyEvent(state, { type: Action.WATCHING, payload: { run_id: document.body.dataset.runId } });

const clockOf = playback.createClockInfo(RunStatus.FINISHED);
const clockInfo = (derived) => clockOf(derived, pb.clock);

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
    submits.sent();
    state = applyEvent(state, { type: Action.SUBMITTED, payload: null });
  }
}

/** Show the run `runId` (watched: its backlog, then live); our own run, if shown, stays one click away (state.js). */
function follow(runId) {
  state = applyEvent(state, { type: Action.WATCHING, payload: { run_id: runId } });
  socket.watch(runId);
}

/** A class's events: a student's page follows the teacher's new run or the stored run the teacher shows, even while
 * its own run is live (kept aside, one click away); a teacher's page tells the class which run it shows (class.js). */
function onClass(event) {
  if (event.type === ConnectionEvent.CONNECTED) klass.connected();
  const about = [ServerEvent.CLASS_STATE, ServerEvent.CLASS_CLOSED, ServerEvent.RUN_ERROR, ServerEvent.RUN_STARTED];
  if (!about.includes(event.type)) return;
  const teachers = klass.onEvent(event);
  if (teachers) follow(teachers);
}

/** A submit the server would refuse is refused here with the server's words (submits.js). */
function lockedOut(name) {
  const why = submits.refusal(klass);
  if (why) state = { ...state, error: { ...why, run_id: null, refused: name } };
  return Boolean(why);
}

function onServer(event) {
  onClass(event);
  const before = state.run;
  state = applyEvent(state, event);
  if (event.type === ServerEvent.MODEL_STATUS && "vllm" in event.payload) {
    editor.setVllm(event.payload.vllm, event.payload.vllm_problem);
    renderPresets(dom.presetButtons, presets, dom.presetPick, state.model);  // a vLLM preset without vLLM: disabled, with why
  }
  const run = state.run;
  if (event.type === ConnectionEvent.CONNECTED && run && run.id && isLive(run)) socket.watch(run.id);  // rejoin
  const started = event.type === ServerEvent.RUN_STARTED && run && run.id === event.payload.run_id;
  if (started && (!before || before.id !== run.id || !before.workload)) {
    // arrivals in ms happen on the lanes' clocks: the steps clock would hide every wait, so such a run opens on ms;
    // a preset's run (clicked, linked, replayed or watched) opens on the clock its lesson speaks in
    const named = run.workload.clock || (presets.find((p) => p.name === run.workload.name) || {}).clock;
    pb = { ...pb, t: 0, playing: true, clock: isTimed(run.workload) ? "ms" : named || pb.clock };
    ui = { ...ui, requestLane: null, link: null, intro: false, slo: null };  // a new run: its own SLO
    if (!run.own) {  // a shared link, a replay or the teacher's run: its mix in the editor, its preset's lesson and button
      editor.load(run.workload);
      ui = { ...ui, preset: presets.some((p) => p.name === run.workload.name) ? run.workload.name : null };
      if (!classPage) writeUrl(location.pathname, encodeMix({ workload: run.workload }));
    }
    // the address replays this run (a student's stays the class's link, which follows the teacher)
    if (!classPage) writeUrl(`/runs/${encodeURIComponent(run.id)}`, location.hash.slice(1));
    ui = { ...ui, zoom: null };
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

/** The playhead for a click or tap at canvas x (on the layout on screen): the end of the step under it on the step clock. */
function seekTo(x, derived, limit) {
  if (!derived.lanes.length || !shownLayout) return;
  let t = timeAt(shownLayout, x);
  if (pb.clock === "steps") t = Math.ceil(t);
  pb = playback.seek({ ...pb, playing: false }, t, limit);
}

function onInput(a, derived) {
  const { limit, edges, finished } = clockInfo(derived);
  ui = applyTeach(ui, a, { clock: pb.clock, t: pb.t, layout: shownLayout, full: shownAxis.full });
  switch (a.type) {
    case "presets":
      presets = a.presets;
      renderPresets(dom.presetButtons, presets, dom.presetPick, state.model);
      if (!document.body.dataset.runId) loadFromHash(!missingRun);  // a /runs/<id> page shows its run's mix instead
      break;
    case "limits":
      editor.setLimits(a.limits);
      promptLimit = a.limits.max_prompt_chars ?? promptLimit;
      submits.setLimit(a.limits.submits_per_minute);
      break;
    case "preset": {
      const preset = presets.find((p) => p.name === a.name);
      if (!preset || lockedOut(preset.name) || presetProblem(preset, state.model)) break;  // e.g. vLLM not installed
      editor.load(preset, preset.generate);
      ui = { ...ui, preset: preset.name, intro: false, link: null };
      if (!classPage) writeUrl("/", `preset=${encodeURIComponent(preset.name)}`);
      want();
      break;
    }
    case "mix-changed": {
      const { workload, generate } = editor.read();
      ui = { ...ui, preset: null, intro: false, link: null };
      if (!classPage) writeUrl("/", encodeMix({ workload, generate }));
      break;
    }
    case "generate": requestGenerated(a.spec).then(push); break;
    case "generated":
      if (a.requests) editor.fillRequests(a.requests, a.workload);
      else editor.showErrors([{ field: a.field || "generate", message: a.message }]);
      break;
    case "show-mine": {  // our own run again, from its start, with its mix and its preset's lesson
      state = applyEvent(state, { type: Action.SHOW_MINE });
      const run = state.run;
      if (!run) break;
      const name = run.workload ? run.workload.name : run.name;  // a queued run: the name it was submitted with
      if (run.workload) editor.load(run.workload);
      ui = { ...ui, preset: presets.some((p) => p.name === name) ? name : null, zoom: null };
      pb = { ...pb, t: 0, playing: true };
      break;
    }
    case "show-teacher": follow(a.runId); break;
    case "run":  // the button sits in the editor, below the lanes: bring the lanes into view to watch the run
      if (lockedOut(editor.meta.name)) break;
      ui = { ...ui, intro: false, link: null };
      if (want()) scrollToStage = true;  // after the next render, whose lesson text may move the stage
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
    case Input.STEP:
      pb = playback.stepBy(pb, a.delta, edges);
      ui = { ...ui, zoom: followZoom(ui.zoom, pb.clock, pb.t, shownAxis.full) };
      break;
    case Input.LIVE: pb = { ...pb, t: limit, playing: true }; break;
    case Input.ESCAPE:  // close what is open, the innermost first; then leave presenter mode
      if (share.open) share.close();
      else if (ui.help) ui = { ...ui, help: false };
      else if (ui.present) ui = { ...ui, present: false };
      break;
    case Input.START: pb = { ...pb, playing: false, t: 0 }; break;
    case Input.END: pb = { ...pb, playing: false, t: limit }; break;
    case Input.SEEK:
      if (a.x !== undefined) seekTo(a.x, derived, limit);  // a mouse click on the canvas
      else pb = playback.seek({ ...pb, playing: false }, a.t, limit);
      break;
    case Input.TAP:  // a touch: the tooltip of what it touched; only the time axis seeks
      if (derived.lanes.length && shownLayout && a.y < shownLayout.axis.h) seekTo(a.x, derived, limit);
      else ui = { ...ui, hover: { x: a.x, y: a.y } };
      break;
    case Input.SPEED: pb = playback.changeSpeed(pb, a.delta); break;
    case Input.SET_SPEED: pb = { ...pb, speed: a.speed }; break;
    case Input.CLOCK: {  // a key switches to the other clock
      const longest = derived.lanes.reduce((best, l) => (!best || l.records.length > best.records.length ? l : best), null);
      pb = playback.switchClock(pb, a.clock || (pb.clock === "steps" ? "ms" : "steps"), longest && longest.timeline);
      break;
    }
    case MEMORY: ui = { ...ui, memory: !ui.memory }; break;
    case SLO: ui = { ...ui, slo: a.slo }; break;
    case Input.VIEW: ui = { ...ui, view: a.view || (ui.view === "slots" ? "requests" : "slots") }; break;
    case Input.HELP: ui = { ...ui, help: a.close ? false : !ui.help }; break;
    case Input.HOVER: ui = { ...ui, hover: a.x === null ? null : { x: a.x, y: a.y } }; break;
    case Input.REQUEST_LANE: ui = { ...ui, requestLane: a.lane }; break;
    case Input.RESIZE: canvasSize = ""; resizes += 1; break;
    case TURN: if (ui.present && shownLayout && shownLayout.turn) ui = { ...ui, laneFrom: nextTurn(shownLayout.turn, a.delta) }; break;
    default: break;
  }
}

function render() {
  const derived = deriveRun(state.run);
  domain = nextDomain(derived, domain);
  const { limit, edges } = clockInfo(derived);
  const shown = playback.shownTime(pb, reducedMotion.matches, edges);
  const streaming = Boolean(state.run && state.run.status === RunStatus.RUNNING);
  if (syncTeach(dom, ui, { zoomed: Boolean(ui.zoom), hasRun: derived.lanes.length > 0, live: streaming && pb.t < limit - 1e-6 })) {
    window.scrollTo(0, 0);  // presenter mode: the stage fills the screen from the top
  }
  let scene = buildScene(derived, { view: ui.view, clock: pb.clock, t: shown, focus: null, slo: ui.slo });
  sloTargets.sync(state.run && state.run.workload ? state.run.workload.slo || null : null, ui.slo);
  const revealed = !ui.reveal || allRevealed(scene);  // predict-then-reveal holds back what the playhead has not reached
  if (ui.reveal) scene = maskScene(scene);
  const whole = pb.clock === "steps" ? domain.steps : domain.ms;
  const full = revealed ? whole : revealSpan(shown, whole, pb.clock, false);
  shownAxis = { full, ...viewOf(ui.zoom, pb.clock, full) };
  const budget = ui.present && derived.lanes.length ? presenterBudget(dom.wrap, dom.stage) : null;
  const layout = layoutOf(derived, shownAxis, budget, { width: dom.wrap.clientWidth, ui, clock: pb.clock });
  shownLayout = layout;
  const memory = showMemory({ canvas: $("memmap"), button: $("btn-memory"), scale: $("memmap-scale") }, ui.memory, derived,
    scene, state.run, { width: dom.wrap.clientWidth, maxHeight: budget, present: ui.present });  // the memory map in place of the lanes
  dom.canvas.hidden = !derived.lanes.length || memory;
  showPipelines($("pipeline"), scene, dom.wrap.clientWidth);  // pipeline-parallel lanes' stage x time grids
  dom.empty.hidden = Boolean(derived.lanes.length);
  const hover = memory ? null : hovered(layout, scene, ui.hover);
  if (hover && hover.focus) scene = { ...scene, focus: hover.focus };
  let labels = [];  // the text drawn, with its font sizes (for the probe)
  if (derived.lanes.length && !memory) {
    canvasSize = sizeCanvas(dom.canvas, layout, canvasSize);
    labels = draw(dom.canvas.getContext("2d"), scene, layout);
  }
  placeLegendKeys(dom.legendKeys, derived.lanes.length && !memory ? layout.legend.items || [] : [], layout.legend.y);
  placeZoomBand(dom.zoomBand, ui.drag, layout);
  dom.canvas.style.cursor = ui.drag || (ui.hover && ui.hover.y < layout.axis.h) ? "ew-resize" : "";  // drag the axis to zoom
  dom.tooltip.hidden = !hover;
  if (hover) panels.tooltip(hover, ui.hover, layout, derived, ui.view);
  const narration = (!derived.lanes.length && startLine({ missingRun, linkMix: ui.link, ready: state.model.ready }))
    || narrate(scene.lanes.map((l) => ({ name: l.name, policy: l.policy, records: l.records, step: l.step,
      gap: l.gap, ended: l.ended, arrivals: l.timeline.arrivals, metrics: l.metrics, workload: derived.run && derived.run.workload })), pb.clock, shown, streaming, derived.timed, !revealed,
      ui.present);
  setText(dom.narration, narration);
  holdHeight(dom.narration, `${state.run ? state.run.id : ""}|${dom.wrap.clientWidth}|${ui.present}`);
  syncControls(dom, pb, limit, derived.lanes.length > 0, { total: revealed, max: revealed ? limit : full });
  dom.help.hidden = !ui.help;
  renderStatus(dom, state, { presetName: ui.preset, presets, mix: editor.meta, derived, intro: ui.intro, missingRun,
    hide: !revealed, short: ui.present, viewOnly: klass.role === "student" && !klass.info.allow_submit });
  renderNoise($("noise"), derived.metrics, state.model.step_noise);  // how noisy the ms figures are (noise.js)
  renderTagline($("tagline"), derived.metrics);  // no "real model" on a simulated run
  references.update({ presetName: ui.preset, run: state.run, ready: state.connected && state.model.ready });
  klass.sync(state.run, state.mine, { metrics: derived.metrics, seen: revealed && shown >= limit - 1e-9 });  // poll.js
  share.update(state.run && state.run.workload ? state.run.id : null);
  for (const button of Object.values(dom.exports)) button.disabled = !derived.lanes.length;
  panels.refresh(derived, scene, shown, limit, { clock: pb.clock, view: ui.view, reveal: ui.reveal, requestLane: ui.requestLane });
  syncPresent(dom, { present: ui.present, turn: layout.turn, derived, seen: revealed && shown >= limit - 1e-9, memory });
  exposeProbe({ state, pb, ui, derived, layout, scene, shown, limit, narration, canvas: dom.canvas, revealed, axis: shownAxis, labels });
  // the text above the lanes (the lesson, the totals at the reveal) may have grown: lay out again to fit, once per change
  const fits = budget === null ? null : presenterBudget(dom.wrap, dom.stage);
  if (fits !== budget && fits !== refitFrom) push({ type: Input.RESIZE });
  refitFrom = fits !== budget ? budget : null;
}

let lastTime = performance.now();
let scrollToStage = false;  // a run from the editor: scroll to the lanes once the page has drawn its new layout
function frame(now) {
  const dt = Math.min(0.1, Math.max(0, (now - lastTime) / 1000));  // a background tab must not jump the clock
  lastTime = now;
  while (serverEvents.length) onServer(serverEvents.shift());
  let derived = deriveRun(state.run);
  while (inputs.length) { onInput(inputs.shift(), derived); derived = deriveRun(state.run); }
  sendWhatIsNext();
  const { limit, finished } = clockInfo(derived);
  pb = playback.advance(pb, dt, limit, finished);
  const zoom = pb.playing ? followZoom(ui.zoom, pb.clock, pb.t, shownAxis.full) : ui.zoom;  // a zoom pages along
  if (zoom !== ui.zoom) ui = { ...ui, zoom };
  const key = [state, pb, ui, dom.wrap.clientWidth, resizes];
  if (!key.every((k, i) => k === frameKey[i])) {
    frameKey = key;
    render();
  }
  if (scrollToStage) {
    scrollToStage = false;
    dom.stage.scrollIntoView({ behavior: reducedMotion.matches ? "auto" : "smooth", block: "start" });
  }
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
