/**
 * The glossary's popover: any element with `data-term` (a metrics header, a legend key over the canvas)
 * explains itself on hover and on keyboard focus in one shared, visible tooltip (`role="tooltip"`,
 * which every term names in its aria-describedby), placed beside the term and kept inside the viewport.
 * Escape hides it. The text comes from glossary.js, through textContent. A presentational widget: it
 * reads the DOM and the glossary, and never touches the run state or the canvas.
 */
import { el } from "./dom.js";
import { define } from "../core/glossary.js";

const GAP = 8;

export const TIP_ID = "glossary-tip";  // the shared tooltip's id (templates/index.html)

/** A focusable element that explains glossary term `key` (its text `text`, further props as dom.js el takes them). */
export function termNode(key, text, tag = "span", props = {}) {
  const node = el(tag, { ...props, tabIndex: 0, className: `term ${props.className || ""}`.trim(), dataset: { term: key }, text });
  node.setAttribute("aria-describedby", TIP_ID);
  return node;
}

/** Wire the tooltip `tip` to every `[data-term]` element under `root`, now and later. */
export function bindGlossary(root, tip) {
  let anchor = null;

  function place() {
    const r = anchor.getBoundingClientRect();
    const w = tip.offsetWidth;
    const h = tip.offsetHeight;
    const left = Math.max(GAP, Math.min(r.left, innerWidth - w - GAP));
    const below = r.bottom + GAP;
    const top = below + h <= innerHeight - GAP ? below : Math.max(GAP, r.top - h - GAP);
    tip.style.left = `${Math.round(left)}px`;
    tip.style.top = `${Math.round(top)}px`;
  }

  function show(node) {
    const entry = define(node.dataset.term);
    if (!entry) return;
    if (anchor !== node) {
      anchor = node;
      tip.replaceChildren(el("strong", { text: entry.term }), document.createTextNode(` \u2014 ${entry.text}`));
      tip.dataset.term = node.dataset.term;
    }
    tip.hidden = false;
    place();
  }

  function hide() {
    anchor = null;
    tip.hidden = true;
    delete tip.dataset.term;
  }

  const termOf = (target) => (target instanceof Element ? target.closest("[data-term]") : null);
  root.addEventListener("focusin", (e) => { const node = termOf(e.target); if (node) show(node); });
  root.addEventListener("focusout", (e) => { if (termOf(e.target) === anchor) hide(); });
  root.addEventListener("mouseover", (e) => { const node = termOf(e.target); if (node) show(node); });
  root.addEventListener("mouseout", (e) => {
    const node = termOf(e.target);
    if (node && node === anchor && !node.contains(e.relatedTarget) && document.activeElement !== node) hide();
  });
  window.addEventListener("keydown", (e) => {  // Escape hides the tip first (and nothing else)
    if (e.key !== "Escape" || !anchor || tip.hidden) return;
    e.stopPropagation();
    hide();
  }, true);
  window.addEventListener("scroll", () => { if (anchor) place(); }, { passive: true });
  window.addEventListener("resize", () => { if (anchor) place(); });
  return { hide };
}
