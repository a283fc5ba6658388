/**
 * The status around the lanes: the model-loading bar (from model_status), the run line (queued at
 * position N, running, finished, an error, a lost connection), the preset buttons and the lesson of
 * the chosen preset, its placeholders filled from the run as it streams. Text only through textContent.
 */
import { el } from "./dom.js";
import { fillLesson } from "./lesson.js";
import { RunStatus } from "./vocab.js";

export function renderPresets(container, presets) {
  container.replaceChildren(...presets.map((p) => el("button", { type: "button", className: "preset",
    dataset: { preset: String(p.name) }, text: String(p.name) })));
}

function runLine(state) {
  if (!state.connected) return [state.run ? "Reconnecting to the server\u2026" : "Connecting to the server\u2026", "warn"];
  if (state.error && (state.error.run_id === null || (state.run && state.error.run_id === state.run.id))) {
    return [state.error.message, "error"];
  }
  if (state.pending) return ["Sending the mix to the engine\u2026", ""];
  const run = state.run;
  if (!run) return ["", ""];
  switch (run.status) {
    case RunStatus.QUEUED:
      return [run.position ? `Queued: position ${run.position} in the engine's queue (1 = next); it starts when the runs ahead finish.`
        : "Joining the run\u2026", "warn"];
    case RunStatus.RUNNING: return [`Running on ${run.model || "the model"}: step ${run.t} computed, streaming in.`, ""];
    case RunStatus.FINISHED: return [`Finished on ${run.model || "the model"}: ${run.t} shared steps.`, "ok"];
    default: return ["", ""];
  }
}

/** The preset a lesson comes from: the chosen one, or the one a replayed run's mix was (its description may be clipped). */
function lessonPreset(presets, presetName, mix) {
  const chosen = presets.find((p) => p.name === presetName);
  if (chosen) return chosen;
  const start = String(mix.description || "").replace(/\u2026$/, "");
  return presets.find((p) => p.name === mix.name && start && String(p.description || "").startsWith(start)) || null;
}

export function renderStatus(dom, state, presetName, presets, mix, derived) {
  const m = state.model;
  const ready = Boolean(m.ready);
  dom.modelStatus.dataset.ready = String(ready);
  dom.modelStatus.dataset.error = m.error ? "true" : "false";
  const text = m.error ? `Model failed to load: ${m.error}`
    : ready ? `${m.model || "model"} on ${m.device || "?"}, ready`
      : `Loading ${m.model || "the model"}: ${m.message || ""} ${Math.round((m.progress || 0) * 100)}%`;
  if (dom.modelText.textContent !== text) dom.modelText.textContent = text;
  dom.modelProgress.value = ready ? 1 : Number(m.progress) || 0;
  dom.modelProgress.hidden = ready;
  const [line, tone] = runLine(state);
  if (dom.runStatus.textContent !== line) dom.runStatus.textContent = line;
  dom.runStatus.dataset.tone = tone;
  dom.runLink.hidden = !(state.run && state.run.id && state.run.workload);
  for (const button of dom.presetButtons.children) {
    button.setAttribute("aria-pressed", String(button.dataset.preset === presetName));
  }
  // The server takes a submit only once the model is ready, and one run per client at a time.
  const run = state.run;
  const mine = run && run.own && (run.status === RunStatus.QUEUED || run.status === RunStatus.RUNNING);
  const why = !state.connected ? "not connected to the server" : !ready ? "the model is still loading"
    : state.pending || mine ? "wait for your run to finish" : "";
  for (const button of [...dom.presetButtons.children, dom.runMix]) {
    if (!button) continue;
    button.disabled = Boolean(why);
    button.title = why || (button.dataset.preset ? "run this preset" : "run the mix below");
  }
  const empty = m.error ? "The model could not be loaded, so nothing can run; see the message at the top."
    : !ready ? "The model is loading. Pick a preset once it is ready; its steps stream in here as they are computed."
      : "Pick a preset above to run it on the real model, or write your own mix in the editor below.";
  if (dom.empty.textContent !== empty) dom.empty.textContent = empty;
  const preset = lessonPreset(presets, presetName, mix);
  const source = preset ? String(preset.description || "")
    : mix.description || (mix.name !== "custom" ? mix.name : "Your own mix, from the editor below.");
  const lesson = fillLesson(source, preset ? preset.name : mix.name, derived);
  if (dom.lesson.textContent !== lesson) dom.lesson.textContent = lesson;
}
