/**
 * The table under the charts: one row per (rate, lane) with the numbers `vllm bench serve` reports,
 * the same values the charts draw (each cell keeps the exact number in data-value), and a link that
 * opens the rate's run, all its lanes, at /runs/<id>. Text only through textContent (dom.js's el).
 */
import { columnsOf, formatValue } from "../core/columns.js";
import { el } from "../ui/dom.js";

/** [key, group, heading, format] for every metric column, in order: the metric table's "sweep" table (catalog.js). */
export const COLUMNS = Object.freeze(columnsOf("sweep").map((c) => {
  const fmt = c.fmtOf(c.key);
  return Object.freeze([c.key, c.group, c.label, (v) => formatValue(v, fmt)]);
}));

function head() {
  const groups = [];
  for (const [, group] of COLUMNS) {
    const last = groups[groups.length - 1];
    if (last && last.group === group) last.span += 1;
    else groups.push({ group, span: 1 });
  }
  const top = el("tr", {}, [el("th", { colSpan: 2 }), ...groups.map((g) => el("th", { scope: "colgroup", colSpan: g.span,
    className: g.group ? "group" : "", text: g.group })), el("th")]);
  const names = el("tr", {}, [el("th", { scope: "col", text: "rate req/s" }), el("th", { scope: "col", text: "lane" }),
    ...COLUMNS.map(([key, , heading]) => el("th", { scope: "col", text: heading, dataset: { metric: key } })),
    el("th", { scope: "col", text: "run" })]);
  return el("thead", {}, [top, names]);
}

function cell(key, format, value) {
  const ok = typeof value === "number" && Number.isFinite(value);
  return el("td", { text: ok ? format(value) : "\u2013", dataset: { metric: key, value: ok ? String(value) : "" } });
}

function runLink(id) {
  if (!id) return el("td", { className: "muted", text: "not stored" });
  const href = `/runs/${encodeURIComponent(id)}`;
  return el("td", {}, [el("a", { href, target: "_blank", rel: "noopener", className: "point-link", text: "open run",
    title: "replay this rate's run, all its lanes (new tab)", dataset: { runId: id } })]);
}

/** Fill `table` with a row per (rate, lane) of `points` (lanes in `lanes` order), or a line saying none yet;
 * `simulated`: a caption says the numbers are the simulator's. */
export function renderTable(table, points, lanes, empty, simulated = false) {
  const rows = [];
  for (const point of points) {
    const names = lanes.length ? lanes : Object.keys(point.lanes);
    names.forEach((lane, i) => {
      const m = point.lanes[lane] || {};
      rows.push(el("tr", { className: i === 0 ? "first" : "", dataset: { rate: String(point.rate), lane } }, [
        el("th", { scope: "row", className: "rate", text: i === 0 ? String(point.rate) : "" }),
        el("th", { scope: "row", text: lane }),
        ...COLUMNS.map(([key, , , format]) => cell(key, format, m[key])),
        runLink(point.point_run_id),
      ]));
    });
  }
  const body = rows.length ? el("tbody", {}, rows)
    : el("tbody", {}, [el("tr", {}, [el("td", { colSpan: COLUMNS.length + 3, className: "empty-row", text: empty })])]);
  const caption = simulated ? [el("caption", { className: "simulated", text: "SIMULATED: the simulator's cost model, "
    + "no model ran; these times are not this machine's" })] : [];
  table.replaceChildren(...caption, head(), body);
}
