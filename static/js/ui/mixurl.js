/**
 * The request mix in the URL, so a link reproduces it: `#preset=mixed` for an unchanged preset,
 * `#mix=<base64url JSON of {workload, generate}>` for anything edited (the workload carries its lanes and
 * its requests; `generate`, the arrival-process panel, only refills that panel; links from before lanes
 * moved into the workload carry `lanes` beside it). Decoding trusts nothing: it
 * parses JSON (never evaluates) and checks the shape; the editor shows the values only as form
 * values, and the server validates them again on submit.
 */

function toBase64Url(text) {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64Url(text) {
  const b64 = text.replace(/-/g, "+").replace(/_/g, "/");
  const binary = atob(b64 + "===".slice((b64.length + 3) % 4));
  return new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
}

export function encodeMix(mix) {
  return `mix=${toBase64Url(JSON.stringify(mix))}`;
}

/** `{preset}` or `{mix: {workload, lanes?, generate?}}` from a location hash, or null when it holds neither. */
export function decodeHash(hash) {
  const params = new URLSearchParams(String(hash || "").replace(/^#/, ""));
  if (params.has("preset")) return { preset: params.get("preset") };
  if (!params.has("mix")) return null;
  try {
    const mix = JSON.parse(fromBase64Url(params.get("mix")));
    const ok = mix && typeof mix === "object" && mix.workload && typeof mix.workload === "object"
      && Array.isArray(mix.workload.requests) && (mix.lanes === undefined || Array.isArray(mix.lanes))
      && (mix.workload.lanes === undefined || Array.isArray(mix.workload.lanes))
      && (mix.generate === undefined || mix.generate === null || typeof mix.generate === "object");
    return ok ? { mix } : null;
  } catch (err) {
    return null;  // a damaged link: ignore it and keep the default mix
  }
}

/** Replace the URL (path and hash) without adding a history entry: "/" for a mix, "/runs/<id>" for a run. */
export function writeUrl(path, fragment) {
  const url = `${path}#${fragment}`;
  if (url !== `${location.pathname}${location.hash}`) history.replaceState(null, "", url);
}
