/**
 * The fleet view's text: each replica's line (up or down and why, what its lane does now, its prefix-cache hits from
 * its /metrics) and the router's counters table (its Prometheus samples, one row per series). Reads the fleet state
 * and the figures; writes page text only through textContent, and only where it changed.
 */
import { el } from "../ui/dom.js";
import { setText } from "./panels.js";

const ms = (v) => (v === null || v === undefined ? "\u2013" : `${Math.round(v).toLocaleString("en")} ms`);
const num = (v) => (Number.isInteger(v) ? v.toLocaleString("en") : v.toLocaleString("en", { maximumFractionDigits: 3 }));

/** A replica's prefix-cache hit rate from its /metrics counters: "46% (1,234 of 2,680 prompt tokens)", or "–". */
export function hitText(metrics) {
  if (!metrics || !metrics.prefix_cache_queries) return "\u2013";
  const { prefix_cache_hits: hits, prefix_cache_queries: queries } = metrics;
  return `${Math.round((100 * hits) / queries)}% (${num(hits)} of ${num(queries)} prompt tokens)`;
}

/** A replica's one line: down and why, or what it runs now and has served. */
export function replicaLine(replica, figures) {
  if (!replica.up) return `not answering: ${replica.error || "no answer"}${replica.records.length ? " (its last steps are kept, greyed)" : ""}`;
  const served = replica.metrics ? `${num(replica.metrics.requests)} requests served` : "";
  return [`${figures.running} running, ${figures.waiting} waiting`, `${figures.tokens_per_s.toFixed(1)} tokens/s`,
    `TTFT p50 ${ms(figures.ttft_p50_ms)}`, `prefix hits ${hitText(replica.metrics)}`, served].filter(Boolean).join(" \u00b7 ");
}

const ROUTER_PREFIX = "vllm_router_";

/** The router's samples as table rows: {name (its prefix dropped), labels ("k=v, ..."), value}, sorted by name. */
export function routerRows(samples) {
  return (samples || [])
    .map((s) => ({ name: s.name.startsWith(ROUTER_PREFIX) ? s.name.slice(ROUTER_PREFIX.length) : s.name,
      labels: Object.entries(s.labels).map(([k, v]) => `${k}=${v}`).join(", "), value: s.value }))
    .sort((a, b) => a.name.localeCompare(b.name) || a.labels.localeCompare(b.labels));
}

/** The router's note and table; returns the rows shown (for the probe). */
export function renderRouter(dom, router) {
  if (!router) {
    setText(dom.routerNote, "waiting for the first answer");
    return [];
  }
  setText(dom.routerNote, router.up ? `${router.policy || "?"} at ${router.url}, scraped from ${router.metrics_url}`
    : `not answering at ${router.metrics_url}: ${router.error}`);
  dom.routerNote.dataset.tone = router.up ? "" : "error";
  const rows = router.up ? routerRows(router.samples) : [];
  if (!dom.routerHead.children.length) {
    dom.routerHead.append(el("tr", {}, ["counter", "labels", "value"].map((t) => el("th", { scope: "col", textContent: t }))));
  }
  const key = JSON.stringify(rows);
  if (dom.routerRows.dataset.key !== key) {
    dom.routerRows.dataset.key = key;
    dom.routerRows.replaceChildren(...rows.map((r) => el("tr", {}, [el("td", { className: "name", textContent: r.name }),
      el("td", { className: "labels", textContent: r.labels }), el("td", { className: "value", textContent: num(r.value) })])));
  }
  return rows;
}
