/**
 * The canvas legend's focusable twins: one transparent button per drawn legend item, laid exactly over
 * it (layout.js placed the items), each naming its glossary term, so hovering or tabbing to "padding" or
 * the KV strip explains it (tips.js). The canvas keeps drawing the legend itself (the PNG export shows
 * it); these only make it reachable. Nodes are reused while the items keep their labels, so a focused
 * key stays focused as the canvas is redrawn.
 */
import { termNode } from "../ui/tips.js";

/** Lay `items` ([{label, term, x, y, w, h}], y from the legend's top at `top`) over the canvas in `box`. */
export function placeLegendKeys(box, items, top) {
  const labels = items.map((i) => `${i.term}|${i.label}`).join("\n");
  if (box.dataset.labels !== labels) {
    box.dataset.labels = labels;
    box.replaceChildren(...items.map((item) => termNode(item.term, "", "button", {
      type: "button", className: "legend-key", ariaLabel: item.label })));
  }
  items.forEach((item, i) => {
    const node = box.children[i];
    const style = { left: `${item.x - 3}px`, top: `${top + item.y - 3}px`, width: `${item.w + 6}px`, height: `${item.h + 6}px` };
    for (const [k, v] of Object.entries(style)) if (node.style[k] !== v) node.style[k] = v;
  });
}
