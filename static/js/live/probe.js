/**
 * window.__live: what the Live view shows, as data, for tests and for anyone curious in the console — the
 * connection, the lane, the clock (the lane time at the right edge, and whether it follows), the steps held
 * and drawn, every run of cells and wait drawn with its rectangle (CSS pixels, relative to the canvas), the
 * KV strip, the requests in the table with their text, the figures (numbers and the text shown) and the
 * capture controls. Tests wait on it, never on a sleep.
 */
import { PALETTE } from "../canvas/cells.js";
import { runRect, spanX } from "./renderer.js";

export function exposeLiveProbe({ state, shown, following, scene, layout, figures, figureText, requests, empty, capture }) {
  const rect = (t0, t1, y, h) => ({ ...spanX(layout, scene, t0, t1), y, h });
  const last = shown.state.records.length ? shown.state.records[shown.state.records.length - 1] : null;
  window.__live = {
    connected: state.connected,
    model: { ...state.model },
    error: state.error,
    lane: state.lane ? { ...state.lane } : null,
    following,
    now: shown.now,
    window: { from: scene.from, to: scene.to },
    records: shown.state.records.length,
    lastStep: last ? last.step : null,
    lastEnd: last ? last.start_ms + last.ms : null,   // when the newest step ended (lane ms)
    stepsDrawn: scene.steps,
    runs: scene.runs.map((run) => ({ row: run.row, kind: run.kind, request: run.request, steps: run.steps,
      stop: run.stop, t0: run.t0, t1: run.t1, rect: runRect(layout, scene, run) })),
    waits: scene.waits.map((w) => ({ t0: w.t0, t1: w.t1, rect: rect(w.t0, w.t1, layout.plot.y, layout.plot.h) })),
    arrivals: scene.arrivals.map((a) => ({ ...a })),
    layout: { width: layout.width, height: layout.height, plot: { ...layout.plot }, kv: { ...layout.kv } },
    requests: requests.map((q) => ({ id: q.id, status: q.status, stop: q.stop, prompt: q.prompt, tokens: q.tokens,
      max_tokens: q.max_tokens, text: q.text, ttft_ms: q.ttft_ms, tpot_ms: q.tpot_ms })),
    requestsHeld: shown.state.requests.length,
    figures: { ...figures },
    figureText: { ...figureText },
    empty,
    capture: { ...capture },
    palette: PALETTE,
  };
}
