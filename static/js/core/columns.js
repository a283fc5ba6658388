/**
 * The page's tables as the metric table declares them (catalog.js, from engine/report/metric_table.py): which columns a
 * table has, in order, with their headings, formats, glossary terms and which way is better; and how a value
 * prints under a format spec (the same specs Python's format() reads: "d", ".2f", ".0%", ",.0f"). Pure data
 * and small functions; knows nothing of the DOM.
 */
import { METRICS, SERVING, TABLES } from "./catalog.js";

const DASH = "\u2013";
const BY_KEY = Object.freeze(Object.fromEntries([...SERVING, ...METRICS].map((m) => [m.key, m])));

/** The catalog's entry for a metric key (a lane metric or a sweep's serving metric). */
export function metricOf(key) {
  return BY_KEY[key];
}

/** One decimal, as the classroom table prints it, plus the exact value when rounding hides it: "2.4 (2.375)". */
function formatMean(v) {
  const short = v.toFixed(1);
  const exact = Number(v.toFixed(3));
  return Math.abs(exact - Number(short)) > 1e-9 ? `${short} (${exact})` : short;
}

/** `v` printed by a format spec; a dash for null or undefined. */
export function formatValue(v, fmt) {
  if (v === null || v === undefined) return DASH;
  if (fmt === "mean") return formatMean(v);
  if (fmt === "exact") return String(Number(v.toFixed(3)));  // 2.375 stays 2.375, 2.0 is 2
  if (fmt === "d") return String(Math.round(v));
  if (fmt === ",.0f") return Math.round(v).toLocaleString("en");
  const percent = /^\.(\d+)%$/.exec(fmt);
  if (percent) return `${(v * 100).toFixed(Number(percent[1]))}%`;
  const fixed = /^\.(\d+)f$/.exec(fmt);
  if (fixed) return v.toFixed(Number(fixed[1]));
  throw new Error(`unknown format ${fmt}`);
}

/**
 * A table's columns ("page", "compare", "sweep"): {key, metrics, label, fmt (null: each metric's), sep, term,
 * better (the first metric's), when, group}.
 */
export function columnsOf(table) {
  return TABLES[table].map((c) => {
    const first = metricOf(c.metrics[0]);
    return { ...c, label: c.label ?? first.label, term: c.term ?? first.term, better: first.better,
      fmtOf: (key) => c.fmt ?? metricOf(key).fmt };
  });
}

/** What a column's cell says for metrics `m`: its metrics joined by its separator, a dash when the first is null. */
export function cellText(column, m) {
  const first = m[column.metrics[0]];
  if (first === null || first === undefined) return DASH;
  return column.metrics.map((key) => formatValue(m[key], column.fmtOf(key))).join(column.sep);
}
