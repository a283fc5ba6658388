/**
 * Where both runs sit on the compare page's one canvas: layout.js's computeLayout for all lanes on one
 * x-axis (one domain, one playhead), then a band above each run's first lane for its heading (the page
 * lays the run's name, model, date and link over it as DOM). Everything below a band moves down by its
 * height; x never changes, so the main page's cellRect / hitTest / timeX work on this layout as they
 * are. Plain data; knows nothing of colours or the DOM.
 */
import { computeLayout } from "../canvas/layout.js";

export const BAND_H = 34;  // a run's heading band, in CSS pixels

function moved(rect, dy) {
  return { ...rect, y: rect.y + dy };
}

/**
 * lanes: compare/runs.js layoutLanes (each with its `side`); the rest as computeLayout. Adds `groups`:
 * [{side, band: {x, y, w, h}, lanes: [names]}] in page order.
 */
export function compareLayout(width, lanes, options) {
  const base = computeLayout(width, lanes, options);
  const groups = [];
  let dy = 0;
  const placed = base.lanes.map((lane) => {
    if (!groups.length || groups[groups.length - 1].side !== lane.side) {
      groups.push({ side: lane.side, band: { x: 0, y: lane.title.y + dy, w: width, h: BAND_H }, lanes: [] });
      dy += BAND_H;
    }
    groups[groups.length - 1].lanes.push(lane.name);
    return { ...lane, title: moved(lane.title, dy), marks: moved(lane.marks, dy), grid: moved(lane.grid, dy),
      kv: moved(lane.kv, dy) };
  });
  return { ...base, height: base.height + dy, lanes: placed, legend: moved(base.legend, dy), groups };
}
