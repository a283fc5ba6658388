/**
 * Capture and replay: the last N finished live requests, or those of the last S seconds, as a workload
 * (GET /api/live/capture?last=N or ?window_s=S), long quiet gaps compressed on request (gaps over 3 s cut to
 * 1 s), to download, or to open on the main page as a `#mix=` link (mixurl.js), where it runs on the static,
 * dynamic and continuous lanes. A capture is {n, by: "requests" | "seconds", seconds, compress}. `fetchCapture`
 * answers by queueing an input ({type: "captured", workload} or {type: "capture-failed", message});
 * live/main.js decides what to do with it. Knows no state and no DOM.
 */
import { encodeMix } from "../ui/mixurl.js";

export const CAPTURE_MAX = 32;     // the server's max_requests, the most one workload holds
export const CAPTURE_DEFAULT = 16;
export const SECONDS_MAX = 86400;  // the server's longest window
export const SECONDS_DEFAULT = 120;
export const GAP_OVER_S = 3;       // with compress: gaps between arrivals longer than this ...
export const GAP_TO_S = 1;         // ... replay as this long

/** N from the field's text: a whole number 1..CAPTURE_MAX (the default when it is not a number). */
export function captureCount(text) {
  const n = Math.round(Number(text));
  return Number.isFinite(n) && String(text).trim() !== "" ? Math.max(1, Math.min(CAPTURE_MAX, n)) : CAPTURE_DEFAULT;
}

/** S from the field's text: seconds above 0, at most SECONDS_MAX (the default when it is not a number). */
export function captureSeconds(text) {
  const s = Number(text);
  return Number.isFinite(s) && String(text).trim() !== "" && s > 0 ? Math.min(SECONDS_MAX, s) : SECONDS_DEFAULT;
}

/** The query of a capture: `last=N` or `window_s=S`, and the compression when asked. */
export function captureQuery({ n, by = "requests", seconds = SECONDS_DEFAULT, compress = false }) {
  const pick = by === "seconds" ? `window_s=${seconds}` : `last=${n}`;
  return compress ? `${pick}&compress_over_s=${GAP_OVER_S}&compress_to_s=${GAP_TO_S}` : pick;
}

/** The capture's address (`download`: as a file). */
export function captureUrl(capture, download = false) {
  return `/api/live/capture?${captureQuery(capture)}${download ? "&download=1" : ""}`;
}

/** What the capture will hold, in a sentence (`finished`: the finished requests the page has seen). */
export function captureNote(capture, finished) {
  const which = capture.by === "seconds" ? `the finished requests that arrived in the last ${capture.seconds} s (at most ${CAPTURE_MAX})`
    : `the last ${Math.min(capture.n, finished)} finished request${Math.min(capture.n, finished) === 1 ? "" : "s"} (of ${finished} here)`;
  const gaps = capture.compress ? `, with every quiet gap over ${GAP_OVER_S} s cut to ${GAP_TO_S} s`
    : `; traffic that came minutes apart replays as mostly waiting, unless you compress the gaps`;
  return `Captures ${which}: their arrival times${gaps}, prompts and output lengths, as a workload that replays on `
    + "the static, dynamic and continuous lanes.";
}

/** The main page's address that loads `workload` into its editor and runs it. */
export function mainPageUrl(workload) {
  return `/#${encodeMix({ workload })}`;
}

/** Ask the server for a capture; the answer goes onto `push`. */
export function fetchCapture(capture, push) {
  fetch(captureUrl(capture))
    .then((r) => r.json().then((body) => ({ ok: r.ok, body })))
    .then(({ ok, body }) => push(ok ? { type: "captured", workload: body }
      : { type: "capture-failed", message: String((body && body.error) || "the server refused the capture") }))
    .catch((err) => push({ type: "capture-failed", message: `the capture could not be fetched: ${err && err.message}` }));
}
