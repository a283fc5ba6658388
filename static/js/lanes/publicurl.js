/**
 * The address shared links and QR codes carry (`GET /api/share`: the server's public URL, never a client-chosen
 * Host), fetched once; and, when that address is loopback (127.0.0.1, localhost), the warning that a phone cannot
 * reach it and how to fix it. share.js and class.js write links with it; neither touches the run state.
 */
let asked = null;

/** {base, loopback, warning}; the page's own origin while the server does not answer. */
export function shareInfo() {
  if (!asked) {
    asked = fetch("/api/share").then((r) => r.json())
      .catch(() => ({ base: `${location.origin}/`, loopback: false, warning: null }));
  }
  return asked;
}

/** The full link of `path` (e.g. "/runs/abc") at the public address. */
export function publicLink(info, path) {
  return new URL(path.replace(/^\//, ""), info.base).href;
}

/** Show `info`'s loopback warning in `node` (hidden when there is none). */
export function showWarning(node, info) {
  node.textContent = info.warning || "";
  node.hidden = !info.warning;
}
