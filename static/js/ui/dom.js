/**
 * The one way the page builds DOM nodes: `el(tag, props, children)`. Text goes in as the `text` prop,
 * through textContent (never innerHTML), so user or model text that looks like markup shows literally.
 */

/** A new element: `props` are set on it (`text` as its textContent, `dataset` merged), `children` appended. */
export function el(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "text") node.textContent = value;
    else node[key] = value;
  }
  for (const child of children) node.append(child);
  return node;
}
