/**
 * Nearest-rank percentile and mean over a list of numbers (engine/report/stats.py's): what the lane and fleet
 * metrics both compute with.
 */

/** Nearest-rank percentile (q in 0..100); null when empty. */
export function percentile(values, q) {
  if (!values.length) return null;
  const ordered = [...values].sort((a, b) => a - b);
  const k = Math.max(0, Math.min(ordered.length - 1, Math.ceil((ordered.length * q) / 100) - 1));
  return ordered[k];
}

export function mean(values) {
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
}
