/**
 * The compare page's metrics table: for each lane name, run A's row, run B's row and — when both runs
 * have that lane — a highlighted "B − A" row of differences, each marked better or worse by the
 * metric's direction (fewer steps, lower TTFT, more tokens/s …). Every number is metrics.js's
 * laneMetrics of the stored step records; each cell keeps the exact value in data-value. Text only
 * through textContent (dom.js's el).
 */
import { columnsOf, formatValue } from "../core/columns.js";
import { el } from "../ui/dom.js";

const DASH = "\u2013";
const MINUS = "\u2212";

/**
 * [metric key, heading, format, which way is better ("lower" | "higher" | null)]: the metric table's "compare"
 * table (catalog.js), in its order.
 */
export const COLUMNS = Object.freeze(columnsOf("compare").map((c) => {
  const fmt = c.fmtOf(c.key);
  return Object.freeze([c.key, c.label, (v) => formatValue(v, fmt), c.better, fmt]);
}));
const isShare = (fmt) => fmt.endsWith("%");  // a share (slot use): its differences are in points, never relative

const isNumber = (v) => typeof v === "number" && Number.isFinite(v);

/** B − A of every column where both are numbers (null elsewhere). */
export function differences(a, b) {
  return Object.fromEntries(COLUMNS.map(([key]) => [key, isNumber(a[key]) && isNumber(b[key]) ? b[key] - a[key] : null]));
}

/** "+3", "−0.17 (−13%)", "+33 pts" (a share: slot use), "0": a difference in the column's own format. */
function diffText(fmt, format, d, base) {
  if (Math.abs(d) <= 1e-9 * Math.max(1, Math.abs(base))) return "0";
  const sign = d > 0 ? "+" : MINUS;
  if (isShare(fmt)) return `${sign}${Math.round(Math.abs(d) * 100)} pts`;
  return `${sign}${format(Math.abs(d))}`;
}

/** "(−13%)" of A's value; "" when A is 0 or the difference is (or is in points). */
function relText(fmt, d, base) {
  if (isShare(fmt) || base === 0 || Math.abs(d) <= 1e-9 * Math.max(1, Math.abs(base))) return "";
  return `${d > 0 ? "+" : MINUS}${Math.round((Math.abs(d) / Math.abs(base)) * 100)}%`;
}

function verdict(better, d, base) {
  if (!better || d === null || Math.abs(d) <= 1e-9 * Math.max(1, Math.abs(base))) return "";
  return (better === "lower") === (d < 0) ? "better" : "worse";
}

function valueCell(key, format, v) {
  return el("td", { text: isNumber(v) ? format(v) : DASH, dataset: { metric: key, value: isNumber(v) ? String(v) : "" } });
}

function diffCell(key, format, better, fmt, d, base) {
  if (d === null) return el("td", { text: DASH, dataset: { metric: key, value: "" } });
  const judged = verdict(better, d, base);
  const rel = relText(fmt, d, base);
  return el("td", { className: judged, title: judged ? `B is ${judged} (${better} is better)` : "",
    dataset: { metric: key, value: String(d) } }, [el("span", { className: "abs", text: diffText(fmt, format, d, base) }),
    ...(rel ? [el("span", { className: "rel", text: rel })] : [])]);
}

function row(side, lane, head, cells, className = "", label = head) {
  return el("tr", { className, dataset: { side, lane } }, [el("th", { scope: "row", text: head, ariaLabel: label }), ...cells]);
}

/**
 * Fill `table`: `lanes` from compare/runs.js pairedLanes, `metrics` = {A: {lane: m}, B: {lane: m}}.
 * One tbody per lane name, so a lane's rows read together.
 */
export function renderCompareTable(table, lanes, metrics) {
  const head = el("tr", {}, [el("th", { scope: "col", text: "run \u00b7 lane" }), ...COLUMNS.map(([key, heading, , better]) =>
    el("th", { scope: "col", text: heading, title: better ? `${better} is better` : "", dataset: { metric: key } }))]);
  const bodies = lanes.map(({ name, sides }) => {
    const only = sides.length === 1 ? ` (only in ${sides[0]})` : "";
    const rows = sides.map((side) => {
      const m = metrics[side][name];
      return row(side, name, `${side} \u00b7 ${name}${only}`, COLUMNS.map(([key, , format]) => valueCell(key, format, m[key])));
    });
    if (sides.length === 2) {
      const [a, b] = sides.map((side) => metrics[side][name]);
      const d = differences(a, b);
      rows.push(row("diff", name, "B \u2212 A",
        COLUMNS.map(([key, , format, better, fmt]) => diffCell(key, format, better, fmt, d[key], a[key])), "diff",
        `B \u2212 A, ${name} lane`));
    }
    return el("tbody", { dataset: { lane: name } }, rows);
  });
  table.replaceChildren(el("thead", {}, [head]), ...bodies);
}
