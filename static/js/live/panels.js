/**
 * Everything on the Live view around the canvas: the model line (model_status, as on the other pages), the
 * lane line (connected, open, paused), the figures panel, the requests table (newest first, each row's text
 * growing as it streams), the empty state (how to send traffic here) and the capture note. Reads the state
 * and the figures; writes page text only through textContent, and only where it changed.
 */
import { el } from "../ui/dom.js";
import { captureNote, captureUrl } from "./capture.js";
import { summaryTimes } from "./figures.js";
import { LiveStatus } from "./state.js";
import { count } from "../core/words.js";

export const SHOWN_REQUESTS = 50;
const PROMPT_CHARS = 60;

export function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

const ms = (v) => (v === null || v === undefined ? "\u2013" : `${Math.round(v).toLocaleString("en")}`);
const short = (text) => (text.length > PROMPT_CHARS ? `${text.slice(0, PROMPT_CHARS - 1)}\u2026` : text);

export function renderModel(dom, m) {
  dom.modelStatus.dataset.ready = String(Boolean(m.ready));
  dom.modelStatus.dataset.error = m.error ? "true" : "false";
  setText(dom.modelText, m.error ? `Model failed to load: ${m.error}`
    : m.ready ? `${m.model || "model"} on ${m.device || "?"}, ready` : `Loading ${m.model || "the model"}: ${m.message || ""} ${Math.round((m.progress || 0) * 100)}%`);
  dom.modelProgress.value = m.ready ? 1 : Number(m.progress) || 0;
  dom.modelProgress.hidden = Boolean(m.ready);
}

/** [text, tone] of the line above the canvas. */
export function laneLine(state, figures, pausedAt) {
  if (!state.connected) return [state.lane ? "Reconnecting to the server\u2026" : "Connecting to the server\u2026", "warn"];
  if (state.error) return [state.error, "error"];
  if (!state.lane || !state.lane.ready) return ["The live lane opens when the model is ready.", "warn"];
  const policy = state.lane.traits ? `, ${state.lane.traits.label.toLowerCase()}` : "";  // the engine's own words
  const lane = `Live lane: ${count(state.lane.slots, "slot")}${policy}`;
  if (pausedAt) return [`Paused at ${pausedAt}: the window is frozen for reading (steps keep arriving). Follow resumes.`,
    "warn"];
  return [`${lane} \u00b7 ${figures.running} running, ${figures.waiting} waiting \u00b7 the last 30 s, now at the right `
    + "edge.", ""];
}

/** The figures panel: one <dd data-figure="..."> per figure. */
export function renderFigures(container, f) {
  const pair = (a, b) => (a === null ? "\u2013" : `${ms(a)} / ${ms(b)} ms`);
  const text = {
    running: String(f.running),
    waiting: String(f.waiting),
    tokens_per_s: f.tokens_per_s.toFixed(1),
    kv: f.kv_pct === null ? "\u2013" : `${f.kv_pct.toFixed(f.kv_pct < 10 ? 1 : 0)}%`,
    ttft: pair(f.ttft_p50_ms, f.ttft_p95_ms),
    tpot: pair(f.tpot_p50_ms, f.tpot_p95_ms),
    queue: pair(f.queue_p50_ms, f.queue_p95_ms),
  };
  for (const node of container.querySelectorAll("[data-figure]")) setText(node, text[node.dataset.figure] ?? "");
  return text;
}

/** The lane options panel's text, by <dd data-option="...">: how the lane batches (engine.live.LiveLane.options). */
export function optionTexts(o) {
  if (!o) return { slots: "\u2013", budget: "\u2013", chunk: "\u2013", fused: "\u2013", prefix: "\u2013", kv: "\u2013" };
  const mib = o.kv_bytes / (1 << 20);
  return {
    slots: String(o.slots),
    budget: o.max_batch_tokens === null ? "no cap" : `${o.max_batch_tokens} tokens`,
    chunk: o.chunk_size === null ? "whole prompt" : `${o.chunk_size} tokens`,
    fused: o.fused ? "one forward a step" : "prefill call + decode call",
    prefix: o.prefix_cache ? "on" : "off",
    kv: `${count(o.kv_blocks, "block")} of ${o.kv_block_size} \u00b7 ${mib.toFixed(mib < 10 ? 1 : 0)} MiB`,
  };
}

/** The lane options panel: one <dd data-option="..."> per option. */
export function renderOptions(container, options) {
  const text = optionTexts(options);
  for (const node of container.querySelectorAll("[data-option]")) setText(node, text[node.dataset.option] ?? "");
  return text;
}

/** The requests the table shows: newest first, at most SHOWN_REQUESTS, with their times. */
export function shownRequests(requests) {
  return requests.slice(-SHOWN_REQUESTS).reverse().map((q) => ({ ...q, ...summaryTimes(q) }));
}

function newRow(id) {
  const cells = ["id", "status", "prompt", "tokens", "ttft", "tpot", "written"]
    .map((name) => el("td", { className: name }));
  cells[0].textContent = id;
  cells[2].append(el("span", { className: "clamp" }));
  return el("tr", { dataset: { id } }, cells);
}

const SIM_WORDS = "SIMULATED words: the simulator's placeholder tokens read as words; no model ran";

/**
 * Rows of the requests table for `shown` (shownRequests); `rows` caches each id's <tr> between frames; `simulated`:
 * the lane is the simulator's, so its text is marked SIMULATED (its words are placeholders, not a model's).
 */
export function renderRequests(tbody, shown, rows, simulated = false) {
  for (const id of [...rows.keys()]) if (!shown.some((q) => q.id === id)) rows.delete(id);
  const ordered = shown.map((q) => {
    const tr = rows.get(q.id) || newRow(q.id);
    rows.set(q.id, tr);
    const [, status, prompt, tokens, ttft, tpot, written] = tr.children;
    setText(status, q.stop ? `${q.status} (${q.stop})` : q.status);
    status.dataset.status = q.status;
    setText(prompt.firstChild, short(q.prompt || ""));
    prompt.title = q.prompt || "";
    setText(tokens, `${q.tokens} / ${q.max_tokens}`);
    setText(ttft, ms(q.ttft_ms));
    setText(tpot, ms(q.tpot_ms));
    setText(written, q.text || "");
    written.classList.toggle("simulated", simulated && Boolean(q.text));
    written.title = simulated ? SIM_WORDS : "";
    written.classList.toggle("writing", q.status === LiveStatus.RUNNING);
    return tr;
  });
  const same = ordered.length === tbody.children.length && ordered.every((tr, i) => tbody.children[i] === tr);
  if (!same) tbody.replaceChildren(...ordered);
}

/** The empty state's two commands, for this page's own origin and the lane's model. */
export function renderEmpty(dom, show, model) {
  dom.empty.hidden = !show;
  if (!show) return;
  const base = `${location.origin}/v1`;
  setText(dom.envLine, `export OPENAI_BASE_URL=${base}  OPENAI_API_KEY=anything`);
  const body = JSON.stringify({ model: model || undefined, stream: true, max_tokens: 32,
    messages: [{ role: "user", content: "Name three fruits." }] });
  setText(dom.curlLine, `curl -N ${base}/chat/completions -H 'Content-Type: application/json' -d '${body}'`);
}

/** The capture note: what a capture of the last `n` would hold, or `message` ({text, tone}: the answer to a click). */
export function renderCapture(dom, capture, finished, message) {
  dom.download.href = captureUrl(capture, true);
  dom.download.setAttribute("aria-disabled", String(finished === 0));
  dom.n.closest("label").hidden = capture.by === "seconds";
  dom.seconds.closest("label").hidden = capture.by !== "seconds";
  const text = message ? message.text
    : finished === 0 ? "No finished requests yet: send some traffic first, then capture it."
    : captureNote(capture, finished);
  setText(dom.captureNote, text);
  dom.captureNote.dataset.tone = message ? message.tone : "";
  return text;
}
