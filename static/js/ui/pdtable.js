/**
 * The P/D table under the metrics table, shown when a run has a P/D lane (prefill and decode engines): every lane's
 * ITL p50 / p99 and TTFT p50 side by side (a colocated lane beside the P/D one: the stall against the later first
 * token), and for a P/D lane its KV copies (blocks, bytes, ms) and the means of its five TTFT parts. Every figure
 * is one of the lane's metrics (core/metrics.js, core/pdmetrics.js: the server's numbers); this module only lays
 * them out. `PD_COLUMNS`, `pdCell` and `partsText` are pure; `renderPdTable` writes the DOM.
 */
import { el } from "./dom.js";

const DASH = "\u2013";
const ms0 = (v) => (v === null || v === undefined ? DASH : v === 0 ? "0" : v.toFixed(v < 10 ? 1 : 0));

/** The table's columns: [{key, label, title}]; a P/D lane's own figures under `pd.*`. */
export const PD_COLUMNS = Object.freeze([
  { key: "p50_itl_ms", label: "ITL p50 ms", title: "median gap between two tokens of one request" },
  { key: "p99_itl_ms", label: "ITL p99 ms", title: "the worst gaps: a long prefill in the batch stalls every decoder" },
  { key: "p50_ttft_ms", label: "TTFT p50 ms", title: "median time to the first token the client gets" },
  { key: "pd.copied", label: "KV copied", title: "KV blocks copied from prefill to decode engines: blocks, bytes, total ms" },
  { key: "pd.mean_prefill_queue_ms", label: "prefill queue", title: "mean ms from arrival to its prefill step" },
  { key: "pd.mean_prefill_ms", label: "prefill", title: "mean ms of the prefill step that wrote its first token" },
  { key: "pd.mean_transfer_ms", label: "copy", title: "mean ms copying its KV blocks to a decode engine" },
  { key: "pd.mean_decode_queue_ms", label: "decode queue", title: "mean ms in the decode engine's queue" },
  { key: "pd.mean_first_decode_ms", label: "first decode", title: "mean ms of the decode engine's first step for it: then the client has its first two tokens" },
]);

/** What one cell says for a lane's metrics `m`: a number in ms, the copies "69 blk · 50.9 MB · 10.4 ms", or a dash. */
export function pdCell(key, m) {
  if (!key.startsWith("pd.")) return ms0(m[key]);
  if (!m.pd) return DASH;
  if (key === "pd.copied") {
    return `${m.pd.blocks} blk \u00b7 ${(m.pd.bytes / 1e6).toFixed(1)} MB \u00b7 ${m.pd.ms.toFixed(1)} ms`;
  }
  return ms0(m.pd[key.slice(3)]);
}

/** Whether a run's metrics hold a P/D lane (the table shows only then). */
export function hasPd(metrics) {
  return Object.values(metrics).some((m) => m && m.pd);
}

/** Fill `table` (its heading row and one row per lane), or hide it when no lane is a P/D lane. */
export function renderPdTable(table, metrics, hidden = {}) {
  if (!table) return;
  const show = hasPd(metrics);
  table.closest("[data-pd]").hidden = !show;
  if (!show) { table.replaceChildren(); return; }
  const head = el("thead", {}, [el("tr", {}, [el("th", { text: "lane", scope: "col" }),
    ...PD_COLUMNS.map((c) => el("th", { text: c.label, scope: "col", title: c.title }))])]);
  const body = el("tbody", {}, Object.entries(metrics).map(([lane, m]) => el("tr", { dataset: { lane } }, [
    el("th", { scope: "row", text: lane }),
    ...PD_COLUMNS.map((c) => el("td", { text: hidden[lane] ? "?" : pdCell(c.key, m), dataset: { lane, metric: c.key } }))])));
  table.replaceChildren(head, body);
}

/** A request's five TTFT parts as the requests table prints them (ms): "0 + 762 + copy 4.5 + 32 + 66". */
export function partsText(parts) {
  return `${ms0(parts.prefill_queue)} + ${ms0(parts.prefill)} + copy ${ms0(parts.transfer)} + ${ms0(parts.decode_queue)} + ${ms0(parts.first_decode)}`;
}
