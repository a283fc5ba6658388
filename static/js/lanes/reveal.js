/**
 * Predict, then reveal: while it is on, the page shows nothing the playhead has not reached, so a class
 * guesses first. A lane's numbers (its caption, its row of the metrics table) appear once the playhead
 * reaches that lane's end; the x-axis spans a length that grows with the playhead (never the run's
 * own, which would say how long it takes) until everything is revealed; the lines that would say totals
 * say so later. Pure functions of a scene; the page writes what they return with textContent.
 */

/** Whether the playhead has reached a scene lane's end (its last step, and it is done). */
export function laneRevealed(lane) {
  return lane.done && lane.step >= lane.records.length;
}

/** Whether every lane is revealed: the run's totals may show. */
export function allRevealed(scene) {
  return scene.lanes.length > 0 && scene.lanes.every(laneRevealed);
}

/** A lane's caption before its end: where it is, and no number that hints at the rest. */
function hiddenCaption(lane) {
  const n = Math.min(lane.step, lane.records.length);
  return n ? `step ${n} \u00b7 predict: how does it end?` : "predict: how does it go?";
}

/** The scene with every unrevealed lane's caption hidden (`hidden: true` on it): the drawn lanes and the run's rows
 * (a fleet is one row, drawn as its replicas' lanes). */
export function maskScene(scene) {
  const mask = (l) => (laneRevealed(l) ? l : { ...l, hidden: true, caption: hiddenCaption(l) });
  return { ...scene, lanes: scene.lanes.map(mask), ...(scene.rows ? { rows: scene.rows.map(mask) } : {}) };
}

/**
 * The x-axis span while not everything is revealed: a length that only depends on the playhead (it grows by half
 * as the playhead nears its right edge), so it says nothing of how long a lane takes; `full` once all is revealed.
 */
export function revealSpan(shown, full, clock, revealed) {
  if (revealed) return full;
  let span = clock === "steps" ? 8 : 1000;
  const need = clock === "steps" ? shown + 2 : shown * 1.15;
  while (span < need) span = clock === "steps" ? Math.ceil(span * 1.5) : span * 1.5;
  return span;
}
