/**
 * The compare page's one loop (/compare/<a>/<b>). The two fetches of /api/runs/<id>, the form and the
 * DOM listeners only queue; each animation frame clamps dt, drains the queue into the page state and
 * the playback clock, advances the clock, and — only when something changed — lays both runs out on
 * one canvas (compare/layout.js), draws them with the main page's renderer, places the run headings,
 * fills the metrics table once, and refreshes window.__compare (compare/probe.js).
 */
import { bindCompareControls } from "./controls.js";
import { bindCompareForm, comparePath, readPair, showFormErrors } from "./form.js";
import { compareLayout } from "./layout.js";
import { exposeCompareProbe } from "./probe.js";
import { LABELS, clockLanes, defaultClock, layoutLanes, longestTimeline, mergeScenes, pairedLanes, sharedDomain,
  sideOf } from "./runs.js";
import { renderCompareTable } from "./table.js";
import { placeHeadings, renderCheck, setStatus } from "./view.js";
import { Input, syncControls } from "../ui/controls.js";
import { tooltipLines } from "../ui/panels.js";
import * as playback from "../core/playback.js";
import { draw } from "../canvas/renderer.js";
import { buildScene } from "../canvas/scene.js";
import { hovered, sizeCanvas } from "../canvas/stage.js";

const $ = (id) => document.getElementById(id);
const dom = {
  stage: $("stage"), wrap: $("canvas-wrap"), canvas: $("lanes"), tooltip: $("tooltip"), status: $("compare-status"),
  btnStart: $("btn-start"), btnBack: $("btn-back"), btnPlay: $("btn-play"), btnFwd: $("btn-fwd"), btnEnd: $("btn-end"),
  scrub: $("scrub"), readout: $("readout"), speed: $("speed"), metricsPanel: $("metrics-panel"),
  metricsTable: $("metrics-table"), metricsCheck: $("metrics-check"),
  form: $("pick-form"), inputA: $("run-a"), inputB: $("run-b"), swap: $("swap"),
};
const words = (text) => String(text || "").split(" ").filter(Boolean);

const inputs = [];
const push = (action) => inputs.push(action);
const reducedMotion = matchMedia("(prefers-reduced-motion: reduce)");

const page = { ids: words(document.body.dataset.runs), missing: words(document.body.dataset.missing),
  status: "loading", message: "" };
const stored = {};     // label -> {ok, body} as each fetch answers
let sides = null;      // [side A, side B] (compare/runs.js sideOf) once both runs are here
let pb = playback.createPlayback();
let ui = { view: "slots", hover: null };
let resizes = 0;
let frameKey = [];
let canvasSize = "";
const headings = {};
const tableKey = { sides: undefined };

bindCompareControls(dom, push);
bindCompareForm(dom, push);
reducedMotion.addEventListener("change", () => push({ type: Input.RESIZE }));
if (page.missing.length) {
  page.status = "missing";
  page.message = `No finished run with id ${page.missing.join(" or ")}.`;
} else {
  page.ids.forEach((id, i) => fetch(`/api/runs/${encodeURIComponent(id)}`)
    .then((r) => r.json().then((body) => push({ type: "loaded", label: LABELS[i], ok: r.ok, body })))
    .catch(() => push({ type: "loaded", label: LABELS[i], ok: false, body: { error: "could not reach the server" } })));
}

function loaded(a) {
  stored[a.label] = a;
  if (!LABELS.every((label) => stored[label])) return;
  const failed = LABELS.filter((label) => !stored[label].ok);
  if (failed.length) {
    page.status = "error";
    page.message = failed.map((label) => `Run ${label} (${page.ids[LABELS.indexOf(label)]}) cannot be shown: `
      + `${stored[label].body.error || "the server refused it"} \u2014 a run that is still queued or running shows here once it has finished.`).join(" ");
    return;
  }
  sides = LABELS.map((label) => sideOf(label, stored[label].body));
  page.status = "ready";
  page.message = `Run A (${page.ids[0]}) above run B (${page.ids[1]}), on one clock.`;
  pb = { ...pb, t: 0, playing: true, clock: defaultClock(sides) };
}

let clockMemo = { key: [], value: { limit: 0, edges: [0] } };
/** How far the playhead may go (the later of the two runs' ends) and where ±1 lands: once per (runs, clock). */
function clockInfo() {
  const key = [sides, pb.clock];
  if (!sides || key.every((k, i) => k === clockMemo.key[i])) return clockMemo.value;
  const lanes = clockLanes(sides);
  clockMemo = { key, value: { limit: playback.extent(lanes, pb.clock), edges: playback.boundaries(lanes, pb.clock) } };
  return clockMemo.value;
}

let layoutMemo = { key: [], value: null };
function layoutOf() {
  const width = dom.wrap.clientWidth;
  const key = [sides, width, ui.view, pb.clock];
  if (key.every((k, i) => k === layoutMemo.key[i])) return layoutMemo.value;
  const domain = sharedDomain(sides);
  layoutMemo = { key, value: compareLayout(width, layoutLanes(sides, ui.view),
    { view: ui.view, clock: pb.clock, domain: pb.clock === "steps" ? domain.steps : domain.ms }) };
  return layoutMemo.value;
}

function onInput(a) {
  const { limit, edges } = clockInfo();
  switch (a.type) {
    case "loaded": loaded(a); break;
    case "pick": {
      const { ids, errors } = readPair(a.a, a.b);
      showFormErrors(dom, errors);
      if (ids) location.assign(comparePath(ids));
      break;
    }
    case "swap": if (page.ids.length === 2) location.assign(comparePath([page.ids[1], page.ids[0]])); break;
    case Input.PLAY: if (sides) pb = playback.togglePlay(pb, limit, true); break;
    case Input.STEP: if (sides) pb = playback.stepBy(pb, a.delta, edges); break;
    case Input.START: pb = { ...pb, playing: false, t: 0 }; break;
    case Input.END: pb = { ...pb, playing: false, t: limit }; break;
    case Input.SEEK: {
      if (!sides) break;
      let t = a.t;
      if (a.x !== undefined) {  // a click on the canvas: to the end of the step under it
        const layout = layoutOf();
        t = (a.x - layout.axis.x) / layout.pxPerUnit;
        if (pb.clock === "steps") t = Math.ceil(t);
      }
      pb = playback.seek({ ...pb, playing: false }, t, limit);
      break;
    }
    case Input.SPEED: pb = playback.changeSpeed(pb, a.delta); break;
    case Input.SET_SPEED: pb = { ...pb, speed: a.speed }; break;
    case Input.CLOCK: pb = playback.switchClock(pb, a.clock, sides && longestTimeline(sides)); break;
    case Input.VIEW: ui = { ...ui, view: a.view }; break;
    case Input.HOVER: ui = { ...ui, hover: a.x === null ? null : { x: a.x, y: a.y } }; break;
    case Input.RESIZE: canvasSize = ""; resizes += 1; break;
    default: break;
  }
}

function render() {
  const { limit, edges } = clockInfo();
  const shown = playback.shownTime(pb, reducedMotion.matches, edges);
  setStatus(dom.status, page.status === "loading" ? `Loading runs ${page.ids.join(" and ")}\u2026` : page.message,
    page.status === "error" ? "error" : "");
  dom.stage.hidden = page.status === "missing";
  dom.wrap.hidden = !sides;
  dom.metricsPanel.hidden = !sides;
  syncControls(dom, pb, limit, Boolean(sides));
  if (!sides) {
    exposeCompareProbe({ page, sides, pb, shown, limit, domain: null, layout: null, scene: null, canvas: dom.canvas });
    return;
  }
  const layout = layoutOf();
  const opts = { view: ui.view, clock: pb.clock, t: shown, focus: null };
  let scene = mergeScenes(sides, sides.map((s) => buildScene(s.derived, opts)));
  const hover = hovered(layout, scene, ui.hover);
  if (hover && hover.focus) scene = { ...scene, focus: hover.focus };  // the same request lights up in both runs
  canvasSize = sizeCanvas(dom.canvas, layout, canvasSize);
  draw(dom.canvas.getContext("2d"), scene, layout);
  placeHeadings(headings, dom.wrap, sides, layout);
  dom.tooltip.hidden = !hover;
  if (hover) {
    dom.tooltip.textContent = tooltipLines(hover.lane, hover.hit, ui.view).join("\n");
    dom.tooltip.style.left = `${Math.min(ui.hover.x + 14, layout.width - 260)}px`;
    dom.tooltip.style.top = `${ui.hover.y + 16}px`;
  }
  if (tableKey.sides !== sides) {
    tableKey.sides = sides;
    const metrics = Object.fromEntries(sides.map((s) => [s.label, s.derived.metrics]));
    renderCompareTable(dom.metricsTable, pairedLanes(sides), metrics);
    renderCheck(dom.metricsCheck, sides);
  }
  exposeCompareProbe({ page, sides, pb, shown, limit, domain: sharedDomain(sides), layout, scene, canvas: dom.canvas });
}

let lastTime = performance.now();
function frame(now) {
  const dt = Math.min(0.1, Math.max(0, (now - lastTime) / 1000));  // a background tab must not jump the clock
  lastTime = now;
  while (inputs.length) onInput(inputs.shift());
  pb = playback.advance(pb, dt, clockInfo().limit, true);
  const key = [page.status, sides, pb, ui, dom.wrap.clientWidth, resizes];
  if (!key.every((k, i) => k === frameKey[i])) {
    frameKey = key;
    render();
  }
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
