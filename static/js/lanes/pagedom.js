/**
 * The lanes page's elements that main.js's loop reads and writes, looked up once by id. It knows the page's ids
 * (templates/index.html), nothing of what they show.
 */
export const $ = (id) => document.getElementById(id);

/** The elements, by the names main.js, panelview.js and controls.js use. */
export function pageDom() {
  return {
    wrap: $("canvas-wrap"), canvas: $("lanes"), empty: $("empty"), tooltip: $("tooltip"), narration: $("narration"),
    btnStart: $("btn-start"), btnBack: $("btn-back"), btnPlay: $("btn-play"), btnFwd: $("btn-fwd"), btnEnd: $("btn-end"),
    btnHelp: $("btn-help"), helpClose: $("help-close"), help: $("help"), scrub: $("scrub"), readout: $("readout"),
    speed: $("speed"), requestLane: $("request-lane"), requestRows: $("request-rows"), metricsTable: $("metrics-table"),
    metricsCheck: $("metrics-check"), editorDetails: $("editor-details"), presetButtons: $("preset-buttons"),
    lesson: $("lesson"), lessonMore: $("lesson-more"), lessonSummary: $("lesson-more-summary"), lessonFull: $("lesson-full"),
    lessonWhy: $("lesson-why"), runStatus: $("run-status"), runLink: $("run-link"), modelStatus: $("model-status"),
    modelText: $("model-text"), modelProgress: $("model-progress"), stage: document.querySelector(".stage"),
    exports: { png: $("export-png"), json: $("export-json"), csv: $("export-csv"), trace: $("export-trace") },
    btnPresent: $("btn-present"), reveal: $("reveal"), presetPick: $("preset-pick"), btnZoomIn: $("btn-zoom-in"),
    btnZoomOut: $("btn-zoom-out"), btnZoomReset: $("btn-zoom-reset"), btnLive: $("btn-live"), legendKeys: $("legend-keys"),
    zoomBand: $("zoom-band"), presentTotals: $("present-totals"),
    laneTurn: $("lane-turn"), laneTurnText: $("lane-turn-text"), lanesPrev: $("btn-lanes-prev"), lanesNext: $("btn-lanes-next"),
    runMix: $("run-mix"),
  };
}
