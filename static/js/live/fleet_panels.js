/**
 * The fleet view's text: each replica's line (up or down and why, what its lane does now, its prefix-cache hits from
 * its /metrics) and the router's counters table (its Prometheus samples, one row per series). Reads the fleet state
 * and the figures; writes page text only through textContent, and only where it changed.
 */
import { el } from "../ui/dom.js";
import { setText } from "./panels.js";

const ms = (v) => (v === null || v === undefined ? "\u2013" : `${Math.round(v).toLocaleString("en")} ms`);
const num = (v) => (Number.isInteger(v) ? v.toLocaleString("en") : v.toLocaleString("en", { maximumFractionDigits: 3 }));

/** A replica's prefix-cache hit rate from its /metrics counters: "46% (1,234 of 2,680)" prompt tokens, or "–". */
export function hitText(metrics) {
  if (!metrics || !metrics.prefix_cache_queries) return "\u2013";
  const { prefix_cache_hits: hits, prefix_cache_queries: queries } = metrics;
  return `${Math.round((100 * hits) / queries)}% (${num(hits)} of ${num(queries)})`;
}

/** A replica's one line: down and why, or what it runs now and has served. */
export function replicaLine(replica, figures) {
  if (!replica.up) return `not answering: ${replica.error || "no answer"}${replica.records.length ? " (its last steps are kept, greyed)" : ""}`;
  const served = replica.metrics ? `${num(replica.metrics.requests)} served` : "";
  return [`${figures.running} running, ${figures.waiting} waiting`, `${figures.tokens_per_s.toFixed(1)} tok/s`,
    `TTFT p50 ${ms(figures.ttft_p50_ms)}`, `prefix hits ${hitText(replica.metrics)}`, served].filter(Boolean).join(" \u00b7 ");
}

const ROUTER_PREFIX = "vllm_router_";
const nameOf = (s) => (s.name.startsWith(ROUTER_PREFIX) ? s.name.slice(ROUTER_PREFIX.length) : s.name);
const labelText = (labels) => Object.entries(labels).map(([k, v]) => `${k}=${v}`).join(", ");

/**
 * The router's samples as two tables: `perWorker`, those labelled `worker` with one column per worker (the replicas'
 * URLs in order, then any other worker the router names) and one row per counter and its other labels; `rows`, the
 * rest, one row per series. Names lose their `vllm_router_` prefix; rows sort by name, then labels; each keeps its
 * family's HELP text (`help`), the row's tooltip.
 */
export function routerTables(samples, replicas = []) {
  const workers = [...replicas];
  const perWorker = new Map();   // "name|labels" -> {name, labels, values: {worker: value}}
  const rows = [];
  for (const s of samples || []) {
    const { worker, ...rest } = s.labels;
    if (worker === undefined) {
      rows.push({ name: nameOf(s), labels: labelText(rest), value: s.value, help: s.help || "" });
      continue;
    }
    if (!workers.includes(worker)) workers.push(worker);
    const key = `${nameOf(s)}|${labelText(rest)}`;
    if (!perWorker.has(key)) perWorker.set(key, { name: nameOf(s), labels: labelText(rest), help: s.help || "", values: {} });
    perWorker.get(key).values[worker] = s.value;
  }
  const order = (a, b) => a.name.localeCompare(b.name) || a.labels.localeCompare(b.labels);
  return { workers, perWorker: [...perWorker.values()].sort(order), rows: rows.sort(order) };
}

const cell = (tag, text, className = "") => el(tag, { className, textContent: text, ...(tag === "th" ? { scope: "col" } : {}) });
function counterCell(r) {
  const td = cell("td", r.labels ? `${r.name} (${r.labels})` : r.name, "name");
  td.title = r.help;   // the router's own HELP text
  return td;
}

function fill(node, trs) {
  const key = JSON.stringify(trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  if (node.dataset.key === key) return;
  node.dataset.key = key;
  node.replaceChildren(...trs);
}

/** The router's note and its two tables; returns what they show (for the probe). */
export function renderRouter(dom, router, replicas) {
  if (!router) {
    setText(dom.routerNote, "waiting for the first answer");
    return null;
  }
  setText(dom.routerNote, router.up ? `${router.policy || "?"} at ${router.url}, scraped from ${router.metrics_url}`
    : `not answering at ${router.metrics_url}: ${router.error}`);
  dom.routerNote.dataset.tone = router.up ? "" : "error";
  const tables = routerTables(router.up ? router.samples : [], replicas);
  const column = (w) => { const i = replicas.indexOf(w); return i < 0 ? w : `replica ${i + 1}`; };
  fill(dom.workerHead, [el("tr", {}, [cell("th", "per worker"), ...tables.workers.map((w) => cell("th", column(w), "value"))])]);
  fill(dom.workerRows, tables.perWorker.map((r) => el("tr", {}, [counterCell(r),
    ...tables.workers.map((w) => cell("td", r.values[w] === undefined ? "\u2013" : num(r.values[w]), "value"))])));
  fill(dom.routerRows, tables.rows.map((r) => el("tr", {}, [counterCell(r), cell("td", num(r.value), "value")])));
  return tables;
}
