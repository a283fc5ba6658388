/**
 * A wide table's cue that it scrolls sideways: `watchOverflow(scroller)` keeps `scroller.dataset.overflow`
 * ("none", "right", "left" or "both": where columns are out of sight) and a note below it ("More columns to the
 * right: scroll sideways (shift + wheel, or drag)") up to date as the table, the window or the scroll position
 * change, so a column past the edge (memory-pressure's "preempted" at 1280 px) is never silently cut off.
 * The page's CSS shades the side with hidden columns. Writes only the scroller's dataset and its note.
 */
import { el } from "./dom.js";

const TEXT = { right: "More columns to the right \u2192 scroll sideways (shift + wheel, or drag)",
  left: "\u2190 More columns to the left: scroll back", both: "\u2190 More columns on both sides: scroll sideways \u2192" };

export function watchOverflow(scroller) {
  const note = el("p", { className: "note scroll-cue", hidden: true });
  note.setAttribute("aria-live", "polite");
  scroller.after(note);
  const update = () => {
    const over = scroller.scrollWidth - scroller.clientWidth > 1;
    const left = over && scroller.scrollLeft > 1;
    const right = over && scroller.scrollLeft + scroller.clientWidth < scroller.scrollWidth - 1;
    const where = left && right ? "both" : right ? "right" : left ? "left" : "none";
    if (scroller.dataset.overflow !== where) scroller.dataset.overflow = where;
    note.hidden = where === "none";
    if (!note.hidden && note.textContent !== TEXT[where]) note.textContent = TEXT[where];
  };
  const observer = new ResizeObserver(update);
  observer.observe(scroller);
  for (const child of scroller.children) observer.observe(child);  // the table grows when a column appears
  scroller.addEventListener("scroll", update, { passive: true });
  update();
  return update;
}
