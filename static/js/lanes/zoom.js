/**
 * Zooming the x-axis to a part of the run, so ninety-six 10-pixel steps become readable: a window
 * `{clock, from, to}` in the clock's unit, or null for the whole run. In (`]`) halves it around the
 * playhead, out (`[`) doubles it, a drag on the axis picks a range, reset shows everything; while it
 * plays, the window pages along with the playhead. A window belongs to one clock (another clock shows the
 * whole run). Pure functions: they return a new window.
 */

const LEAST = { steps: 4, ms: 40 };  // the narrowest window

/** The window the axis shows: {from, span}; the whole `full` span when there is no window for this clock. */
export function viewOf(zoom, clock, full) {
  if (!zoom || zoom.clock !== clock) return { from: 0, span: full };
  const span = Math.min(full, zoom.to - zoom.from);
  const from = Math.max(0, Math.min(zoom.from, full - span));
  return { from, span };
}

/** A window over [a, b] (either order), at least LEAST wide, inside [0, full]; null when it would show everything. */
export function rangeZoom(clock, a, b, full) {
  let from = Math.min(a, b);
  let to = Math.max(a, b);
  if (clock === "steps") { from = Math.round(from); to = Math.round(to); }
  const span = Math.max(LEAST[clock], to - from);
  if (span >= full) return null;
  from = Math.max(0, Math.min(from, full - span));
  return { clock, from, to: from + span };
}

/** Zoom in (`direction` 1: half the span) or out (-1: twice), around `t` when the window holds it, else its middle. */
export function stepZoom(zoom, clock, direction, t, full) {
  const { from, span } = viewOf(zoom, clock, full);
  const centre = t >= from && t <= from + span ? t : from + span / 2;
  const next = direction > 0 ? Math.max(LEAST[clock], span / 2) : span * 2;
  if (next >= full) return null;
  const start = clock === "steps" ? Math.round(centre - next / 2) : centre - next / 2;
  return rangeZoom(clock, start, start + next, full);
}

/** While playing, a window the playhead ran past moves on by its own width (or back, to hold it). */
export function followZoom(zoom, clock, t, full) {
  if (!zoom || zoom.clock !== clock) return zoom;
  const span = zoom.to - zoom.from;
  if (t > zoom.to) return rangeZoom(clock, t - span * 0.1, t + span * 0.9, full) || zoom;
  if (t < zoom.from) return rangeZoom(clock, t - span * 0.1, t + span * 0.9, full) || zoom;
  return zoom;
}
