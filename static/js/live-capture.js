/**
 * Capture and replay: the last N finished live requests as a workload (GET /api/live/capture?last=N), to
 * download, or to open on the main page as a `#mix=` link (mixurl.js), where it runs on the static, dynamic
 * and continuous lanes. `fetchCapture` answers by queueing an input ({type: "captured", workload} or
 * {type: "capture-failed", message}); live-main.js decides what to do with it. Knows no state and no DOM.
 */
import { encodeMix } from "./mixurl.js";

export const CAPTURE_MAX = 32;     // the server's max_requests, the most one workload holds
export const CAPTURE_DEFAULT = 16;

/** N from the field's text: a whole number 1..CAPTURE_MAX (the default when it is not a number). */
export function captureCount(text) {
  const n = Math.round(Number(text));
  return Number.isFinite(n) && String(text).trim() !== "" ? Math.max(1, Math.min(CAPTURE_MAX, n)) : CAPTURE_DEFAULT;
}

/** The main page's address that loads `workload` into its editor and runs it. */
export function mainPageUrl(workload) {
  return `/#${encodeMix({ workload })}`;
}

/** Ask the server for the last `n` finished requests; the answer goes onto `push`. */
export function fetchCapture(n, push) {
  fetch(`/api/live/capture?last=${n}`)
    .then((r) => r.json().then((body) => ({ ok: r.ok, body })))
    .then(({ ok, body }) => push(ok ? { type: "captured", workload: body }
      : { type: "capture-failed", message: String((body && body.error) || "the server refused the capture") }))
    .catch((err) => push({ type: "capture-failed", message: `the capture could not be fetched: ${err && err.message}` }));
}
