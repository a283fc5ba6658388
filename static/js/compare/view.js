/**
 * The compare page's DOM around the canvas: each run's heading (its side, workload name and size,
 * model, date and a link to /runs/<id>) laid over the band compare/layout.js leaves above its lanes,
 * the status line, and the per-run note saying whether the numbers computed here match the server's.
 * Text only through textContent (dom.js's el); positions only through the CSSOM.
 */
import { el } from "../ui/dom.js";
import { isTimed } from "../core/metrics.js";

/** "8 requests · 4 slots · arrivals in steps" */
function workloadText(workload) {
  const n = workload.requests.length;
  const parts = [`${n} ${n === 1 ? "request" : "requests"}`];
  if (workload.slots) parts.push(`${workload.slots} slots`);
  parts.push(isTimed(workload) ? "arrivals in ms" : "arrivals in steps");
  return parts.join(" \u00b7 ");
}

function dateText(created) {
  if (typeof created !== "number") return "";
  return new Date(created * 1000).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

/** One run's heading: "A  mixed  8 requests · 4 slots · … · model · date   run <id> ↗". */
function heading(side) {
  const w = side.run.workload;
  const path = `/runs/${encodeURIComponent(side.id)}`;
  return el("div", { className: "run-head", dataset: { side: side.label } }, [
    el("span", { className: "side", text: side.label, title: `run ${side.label}` }),
    el("span", { className: "what" }, [
      el("strong", { className: "name", text: w.name || "unnamed mix" }),
      el("span", { className: "facts", text: [workloadText(w), side.model, dateText(side.created)].filter(Boolean).join(" \u00b7 ") }),
    ]),
    el("a", { className: "open", href: path, text: `open run ${side.id}`, title: `replay run ${side.label} on the main page` }),
  ]);
}

/** Build the headings once per pair of runs (`holder` keeps them), then place each over its band. */
export function placeHeadings(holder, wrap, sides, layout) {
  if (holder.sides !== sides) {
    holder.sides = sides;
    holder.nodes = sides.map(heading);
    wrap.querySelectorAll(".run-head").forEach((n) => n.remove());
    wrap.append(...holder.nodes);
  }
  for (const node of holder.nodes) {
    const group = layout && layout.groups.find((g) => g.side === node.dataset.side);
    node.hidden = !group;
    if (!group) continue;
    const top = `${group.band.y}px`;
    const height = `${group.band.h}px`;
    if (node.style.top !== top) node.style.top = top;
    if (node.style.height !== height) node.style.height = height;
  }
}

/** The note under the table: per run, whether the page's numbers equal the server's (deriveRun's `check`). */
export function renderCheck(node, sides) {
  const bad = sides.filter((s) => s.derived.check !== "ok");
  const text = bad.length
    ? `Computed here from the step records \u2014 differs from the server's numbers in ${bad.map((s) => `run ${s.label}: ${s.derived.check || "no server numbers"}`).join("; ")}`
    : "Computed here from each run's step records \u2014 identical to the numbers the server stored for both runs.";
  if (node.textContent !== text) node.textContent = text;
  node.dataset.check = bad.length ? "mismatch" : "match";
}

export function setStatus(node, text, tone = "") {
  if (node.textContent !== text) node.textContent = text;
  if ((node.dataset.tone || "") !== tone) node.dataset.tone = tone;
}
