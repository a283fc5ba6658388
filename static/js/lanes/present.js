/**
 * Presenter mode's own pieces around the canvas: the lane pager (when a 3- or 4-lane run shows its lanes in turn
 * rather than shrinking them below what the back of a room reads: layout.js `lanesInTurn`) with its keys, and the
 * totals line (each lane's final numbers, once the playhead reached the end and predict-then-reveal holds nothing
 * back), so the reveal happens without leaving Present. Keys: n or PageDown the next lanes, N or PageUp the
 * previous (a presentation clicker sends PageDown/PageUp). DOM listeners only push input actions; `syncPresent`
 * writes the state back, text through textContent. Knows nothing of the run beyond the metrics it is given.
 */
import { formatValue, metricOf } from "../core/columns.js";
import { el } from "../ui/dom.js";
import { RunStatus } from "../core/vocab.js";

export const TURN = "lanes-turn";  // the input action: {type: TURN, delta: 1 | -1}

const TEXT_ENTRY = new Set(["INPUT", "TEXTAREA", "SELECT"]);

function keyDelta(key) {
  if (key === "n" || key === "PageDown") return 1;
  if (key === "N" || key === "PageUp") return -1;
  return 0;
}

/** The pager's buttons and keys push {type: TURN, delta}; keys only while presenter mode is on. */
export function bindPresent(dom, push) {
  dom.lanesPrev.addEventListener("click", () => push({ type: TURN, delta: -1 }));
  dom.lanesNext.addEventListener("click", () => push({ type: TURN, delta: 1 }));
  window.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || document.body.dataset.present !== "true") return;
    if (TEXT_ENTRY.has(event.target.tagName) && !["radio", "checkbox", "range"].includes(event.target.type)) return;
    const delta = keyDelta(event.key);
    if (!delta) return;
    event.preventDefault();
    push({ type: TURN, delta });
  });
}

/** "lanes 1–2 of 4" for a layout's turn (the canvas titles the lanes); "" when every lane is shown, or when the memory
 * map (`memory`) is shown in place of the lanes: it draws every lane's pool, so "lane 1 of 2" over it would be wrong. */
export function turnText(turn, memory = false) {
  if (memory || !turn || turn.count >= turn.total) return "";
  const span = turn.count === 1 ? `lane ${turn.from + 1}` : `lanes ${turn.from + 1}\u2013${turn.from + turn.count}`;
  return `${span} of ${turn.total}`;
}

/** One lane's totals: "static: 15 steps · 3.21 s · TTFT 412 ms" (three lanes' fit one projector line). */
export function totalsText(name, m) {
  const part = (key, unit) => `${formatValue(m[key], metricOf(key).fmt)}${unit}`;
  return `${name}: ${[part("steps", " steps"), part("wall_s", " s"), `TTFT ${part("mean_ttft_ms", " ms")}`].join(" \u00b7 ")}`;
}

/**
 * Write presenter mode's pieces: the pager (hidden unless lanes take turns), and the totals line, each lane's final
 * numbers in page order once the run has finished and `seen` (the playhead is at the end and predict-then-reveal
 * holds nothing back); until then a note says when they come.
 */
export function syncPresent(dom, { present, turn, derived, seen, memory = false }) {
  const names = derived.lanes.map((l) => l.name);
  const finished = Boolean(derived.run && derived.run.status === RunStatus.FINISHED);
  const totals = present && seen && finished ? Object.fromEntries(names.map((n) => [n, derived.metrics[n]])) : null;
  const text = present ? turnText(turn, memory) : "";
  dom.laneTurn.hidden = !text;
  if (dom.laneTurnText.textContent !== text) dom.laneTurnText.textContent = text;
  const lines = totals ? Object.entries(totals).map(([name, m]) => totalsText(name, m)) : [];
  const key = lines.length ? lines.join("\n") : "";
  const count = String(names.length);  // CSS keeps room for the lines the totals will take
  if (dom.presentTotals.dataset.lanes !== count) dom.presentTotals.dataset.lanes = count;
  if (dom.presentTotals.dataset.key === key) return;
  dom.presentTotals.dataset.key = key;
  dom.presentTotals.dataset.shown = String(Boolean(lines.length));
  dom.presentTotals.replaceChildren(...(lines.length ? lines.map((line) => el("span", { className: "total", text: line }))
    : [el("span", { className: "note", text: "The totals show here when the playhead reaches the end." })]));
}
