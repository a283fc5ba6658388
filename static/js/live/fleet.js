/**
 * The fleet view's one loop. The poller only queues: every POLL_MS it asks `/api/fleet` (the fleet script reads every
 * replica and the router at once, each with a short timeout) and pushes the answer, or why there was none. Each
 * animation frame drains the queue into the fleet state (live/fleet_state.js), extrapolates the shared clock and,
 * only when something changed (a poll, the window moving by a pixel, a resize), draws every replica's lane with the
 * Live view's own scene and renderer (live/scene.js, live/renderer.js) on the same window of that clock, and
 * refreshes the lines, the router table and the probe (window.__fleet).
 */
import { liveFigures } from "./figures.js";
import { POLL_MS, applyFleetPoll, createFleetState, fleetNow } from "./fleet_state.js";
import { renderRouter, replicaLine } from "./fleet_panels.js";
import { setText } from "./panels.js";
import { drawLive, liveLayout, runRect } from "./renderer.js";
import { liveScene } from "./scene.js";
import { WINDOW_MS } from "./state.js";
import { sizeCanvas } from "../canvas/stage.js";

const ROW_H = 12;           // a slot's row: 16 slots of two replicas and the router's table fit one screen
const ASK_TIMEOUT_MS = 5000;

const $ = (id) => document.getElementById(id);
const dom = { status: $("fleet-status"), routerNote: $("router-note"), workerHead: $("worker-head"), workerRows: $("worker-rows"),
  routerRows: $("router-rows") };
const cards = [...document.querySelectorAll(".replica")].map((node) => ({
  node, line: node.querySelector("[data-part=line]"), wrap: node.querySelector("[data-part=wrap]"),
  canvas: node.querySelector("[data-part=canvas]"), sizeKey: "" }));

const queue = [];
let state = createFleetState();
let resizes = 0;
let lastKey = [];

async function poll() {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), ASK_TIMEOUT_MS);
  try {
    const r = await fetch("/api/fleet", { signal: abort.signal, cache: "no-store" });
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    queue.push({ payload: await r.json(), at: performance.now() });
  } catch (e) {
    queue.push({ payload: { failed: e.name === "AbortError" ? "no answer in 5 s" : String(e.message || e) }, at: performance.now() });
  } finally {
    clearTimeout(timer);
    setTimeout(poll, POLL_MS);
  }
}
poll();
for (const card of cards) new ResizeObserver(() => { resizes += 1; }).observe(card.wrap);

const changed = (key) => key.length !== lastKey.length || key.some((k, i) => k !== lastKey[i]);

function statusLine() {
  if (state.failed) return [`The fleet script does not answer: ${state.failed}`, "error"];
  if (!state.polls) return ["Asking the replicas and the router\u2026", ""];
  const down = state.replicas.filter((r) => !r.up).length + (state.router && !state.router.up ? 1 : 0);
  const up = state.replicas.length - state.replicas.filter((r) => !r.up).length;
  return [`${up} of ${state.replicas.length} replicas answering${down ? `, ${down} part${down > 1 ? "s" : ""} down` : ""}`,
    down ? "warn" : ""];
}

function draw(now) {
  const shown = state.replicas.map((replica, i) => {
    const card = cards[i];
    if (!card) return null;
    const slots = replica.slots || 1;
    const layout = liveLayout(card.wrap.clientWidth, slots, ROW_H);
    const scene = liveScene(replica.records, replica.requests, now - WINDOW_MS, now, slots);
    card.sizeKey = sizeCanvas(card.canvas, layout, card.sizeKey);
    drawLive(card.canvas.getContext("2d"), scene, layout, { startedAt: 0, following: true });
    const figures = liveFigures(replica, now);
    const line = replicaLine(replica, figures);
    setText(card.line, line);
    card.line.dataset.tone = replica.up ? "" : "error";
    card.node.classList.toggle("down", !replica.up);
    return { index: replica.index, url: replica.url, up: replica.up, error: replica.error, model: replica.model,
      slots: replica.slots, records: replica.records.length, line, figures, metrics: replica.metrics,
      requests: replica.requests.map((q) => q.id),
      runs: scene.runs.filter((run) => run.request).map((run) => ({ request: run.request, kind: run.kind,
        rect: runRect(layout, scene, run) })) };
  });
  const [text, tone] = statusLine();
  setText(dom.status, text);
  dom.status.dataset.tone = tone;
  const tables = renderRouter(dom, state.router, state.replicas.map((r) => r.url));
  window.__fleet = { polls: state.polls, failed: state.failed, now, status: text, replicas: shown.filter(Boolean),
    router: state.router ? { up: state.router.up, error: state.router.error, policy: state.router.policy, ...tables } : null };
}

function frame(perfNow) {
  while (queue.length) {
    const { payload, at } = queue.shift();
    state = applyFleetPoll(state, payload, at);
  }
  const now = fleetNow(state, perfNow);
  const width = cards.length ? cards[0].wrap.clientWidth : 0;
  const pixel = now === null ? -1 : Math.floor(now / (WINDOW_MS / Math.max(1, width)));
  const key = [state, pixel, resizes];
  if (changed(key)) {
    lastKey = key;
    draw(now ?? Date.now());
  }
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
