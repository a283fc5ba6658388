/**
 * What a frame wrote, as it wrote it: `noting(ctx, kind, out)` is `ctx` that also notes each fillText as
 * {kind, text, px, x, y} in `out` (px: the size of the font it was drawn in, read from ctx.font). The renderer
 * passes it to the painters of one part ("cell", "kv", "row", ...), so a test reads the font sizes actually drawn
 * (probe.js: window.__lanes.labels) instead of working them out again. Draws nothing of its own.
 */

/** The px size in a canvas font string ("600 14px system-ui" -> 14). */
export function fontPx(font) {
  const m = /(\d+(?:\.\d+)?)px/.exec(font);
  return m ? Number(m[1]) : null;
}

export function noting(ctx, kind, out) {
  return new Proxy(ctx, {
    get(target, prop) {
      if (prop === "fillText") {
        return (text, x, y, ...rest) => {
          out.push({ kind, text: String(text), px: fontPx(target.font), x, y });
          target.fillText(text, x, y, ...rest);
        };
      }
      const value = target[prop];
      return typeof value === "function" ? value.bind(target) : value;
    },
    set(target, prop, value) {
      target[prop] = value;
      return true;
    },
  });
}
