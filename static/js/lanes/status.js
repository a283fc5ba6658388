/**
 * The status around the lanes: the model-loading bar (from model_status), the run line (queued at
 * position N, running, switching to another mix, finished, an error, a lost connection), the preset
 * buttons (a click while your run is live stops it and runs the new mix: their titles say so) and the
 * lesson of the chosen preset, its placeholders filled from the run as it streams; before anything is
 * chosen, how to start (a class's view-only student: that the teacher's run will show). Under predict-then-reveal (`hide`) the run line keeps its totals and the lesson
 * its answer until the playhead reaches the end. Presenter mode's compact preset picker mirrors the
 * buttons. Text only through textContent.
 */
import { behindText } from "./class.js";
import { el } from "../ui/dom.js";
import { lessonParts } from "./lesson.js";
import { liveOwnRun } from "./state.js";
import { RunStatus } from "../core/vocab.js";
import { count } from "../core/words.js";

export const INTRO = "Pick a preset above to watch the real model batch its requests, each with a lesson \u2014 start with"
  + " \u201cmixed\u201d \u2014 or open the request mix editor at the bottom of the page to write your own.";

/** Where the lanes will be, before a run: what they will show (the lesson line above already says how to start). */
export const EMPTY = "The lanes draw here: one row per request slot, one column per step, as the run streams in.";

/** What a view-only student's page says before the teacher's first run (it has no presets, no editor to point at). */
const FOLLOWING = "You are in the class: the teacher's run shows here as soon as it starts, with its lesson.";

/** What the page says where the lanes would be when it has no run to show; `viewOnly`: a class's view-only student. */
export function emptyText(state, missingRun, viewOnly = false) {
  const m = state.model;
  if (viewOnly && !missingRun && !m.error) return FOLLOWING;
  if (missingRun) return `There is no run with id ${missingRun}: it may never have existed, or this server has forgotten it. Pick a preset above to run one.`;
  if (m.error) return "The model could not be loaded, so nothing can run; see the message at the top.";
  if (state.next || state.pending) return "Its steps stream in here as the model computes them.";
  if (!m.ready) return "The model is loading. Pick a preset once it is ready; its steps stream in here as they are computed.";
  return EMPTY;
}

/** Whether a preset has a pipeline-parallel lane (stages of the real model's layers: the simulator has none). */
function splitsLayers(preset) {
  return Boolean(preset && Array.isArray(preset.lanes)
    && preset.lanes.some((l) => l && typeof l === "object" && l.pipeline_parallel_size > 1));
}

/** Why a preset cannot run on this server, or null: a tensor- or pipeline-parallel preset on the simulator (no
 * weights to shard, no layers to cut); one with a vLLM lane where vLLM is not installed (the model's status says
 * `vllm: false` and why). Before the status arrives nothing is known, so nothing is refused. */
export function presetProblem(preset, model) {
  if (splitsWeights(preset) && model && model.model === "simulator") {
    return "Not available on this server: its tensor-parallel lane needs the real model (the simulator has no weights to shard).";
  }
  if (splitsLayers(preset) && model && model.ready && model.model === "simulator") {
    return "Not available on the simulator: its pipeline-parallel lanes cut the real model's layers into stage processes.";
  }
  if (!startsVllm(preset) || !model || model.vllm !== false) return null;
  return `Not available on this server: its vLLM lane ${model.vllm_problem || "needs vLLM, which is not installed here"}.`;
}

/** The preset buttons, and the compact picker (`picker`, a select) presenter mode shows instead; a preset this server
 * cannot run (`presetProblem`, from the model's status) is shown disabled, its reason as its title. */
export function renderPresets(container, presets, picker = null, model = null) {
  container.replaceChildren(...presets.map((p) => {
    const problem = presetProblem(p, model);
    return el("button", { type: "button", className: "preset", dataset: { preset: String(p.name) }, text: String(p.name),
      disabled: Boolean(problem), ...(problem ? { title: problem } : {}) });
  }));
  if (picker) {
    picker.replaceChildren(el("option", { value: "", text: "preset\u2026" }),
      ...presets.map((p) => el("option", { value: String(p.name), text: String(p.name), disabled: Boolean(presetProblem(p, model)) })));
  }
}

/** A refused submit, said with what it refused and what the lanes still show: "too many submits…: “mixed” did not
 * start; the lanes show “same” (cancelled)". Null when the error is not a refusal. */
function refusalText(state) {
  const { refused, message } = state.error;
  if (!refused) return null;
  const run = state.run;
  const shown = run && run.workload ? ` the lanes show \u201c${run.workload.name}\u201d${run.status === RunStatus.CANCELLED
    ? " (stopped)" : ""}.` : "";
  return `${message.replace(/[.;\s]+$/, "")}: \u201c${refused}\u201d did not start;${shown || " nothing else runs."}`;
}

/** The preset the page highlights: the one chosen, unless a refusal kept it from running: then the shown run's. */
export function highlightedPreset(state, presetName, presets) {
  if (!(state.error && state.error.refused)) return presetName;
  const shown = state.run && state.run.workload ? state.run.workload.name : null;
  return presets.some((p) => p.name === shown) ? shown : null;
}

/** Whether a workload has a tensor-parallel lane (its ranks shard the real model's weights). */
function splitsWeights(workload) {
  return Boolean(workload && Array.isArray(workload.lanes) && workload.lanes.some((l) => l && l.tensor_parallel_size > 1));
}

/** Whether a run's workload has a vLLM lane, whose engine starts before the run's first step. */
function startsVllm(workload) {
  return Boolean(workload && Array.isArray(workload.lanes) && workload.lanes.some((l) => l && l.engine === "vllm"));
}

/** The run line: [text, tone] ("ok", "warn", "error" or ""); `short`: presenter mode's. */
export function runLine(state, hide, short) {
  if (!state.connected) return [state.run ? "Reconnecting to the server\u2026" : "Connecting to the server\u2026", "warn"];
  if (state.error && (state.error.run_id === null || (state.run && state.error.run_id === state.run.id))) {
    return [refusalText(state) || state.error.message, "error"];
  }
  const run = state.run;
  const on = short ? "" : ` on ${(run && run.model) || "the model"}`;  // presenter mode: the numbers first
  const name = state.next ? `\u201c${state.next.workload.name}\u201d` : "";
  if (state.next && liveOwnRun(state)) return [`Stopping your current run to start ${name}\u2026`, "warn"];
  if (state.next) return [state.model.ready ? `Starting ${name}\u2026` : `Waiting for the model: ${name} starts as soon as it is ready.`, ""];
  if (state.pending) return ["Sending the mix to the engine\u2026", ""];
  if (!run) return ["", ""];
  switch (run.status) {
    case RunStatus.QUEUED:
      if (run.position && run.ahead) return [`Queued: position ${run.position} \u2014 ${behindText(run.ahead)}.`, "warn"];  // a class's run
      return [run.position ? `Queued: position ${run.position} in the engine's queue (1 = next); it starts when the runs ahead finish.`
        : "Joining the run\u2026", "warn"];
    case RunStatus.RUNNING:
      if (run.paused) return [short ? "Paused by the teacher." : "Paused by the teacher: the lanes wait until the run is resumed.", "warn"];
      if (!run.t && startsVllm(run.workload)) return [`Running${on}: starting vLLM\u2026 (its engine loads and compiles the model, about a minute on a CPU), then step 1.`, "warn"];
      return [`Running${on}: ${hide ? "" : `step ${run.t} computed, `}streaming in.`  // Present: one line, so two lanes fit
      + (run.own && !short ? " Another preset or Run stops it and starts that mix." : ""), ""];
    case RunStatus.FINISHED: return [`Finished${on}: ${hide ? (short ? "the totals show at the end"
      : "predict, then reveal (the totals show at the end)") : count(run.t, "shared step")}.`, "ok"];
    case RunStatus.CANCELLED: return ["You stopped this run to start another.", ""];
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

/**
 * Everything above and around the lanes; `intro`: nothing chosen yet (no preset, no link, no edit, no run); `hide`:
 * predict-then-reveal holds back the totals; `short`: presenter mode's run line, without the model's file name.
 */
export function renderStatus(dom, state, { presetName: chosen, presets, mix, derived, intro, missingRun, hide = false,
  short = false, viewOnly = false }) {
  const presetName = highlightedPreset(state, chosen, presets);  // highlight (and teach) what the lanes show
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
  const [line, tone] = runLine(state, hide, short);
  if (dom.runStatus.textContent !== line) dom.runStatus.textContent = line;
  dom.runStatus.dataset.tone = tone;
  for (const button of dom.presetButtons.children) {
    button.setAttribute("aria-pressed", String(button.dataset.preset === presetName));
  }
  if (dom.presetPick && dom.presetPick.value !== (presetName || "")) dom.presetPick.value = presetName || "";
  // The server takes a submit only once the model is ready, and one run per client at a time: a click while our
  // run is live stops it first (state.js, cancel and replace).
  const why = !state.connected ? "not connected to the server" : !ready ? "the model is still loading" : "";
  const switching = state.pending || state.next || liveOwnRun(state) ? " \u2014 switching stops your current run" : "";
  if (dom.presetPick) dom.presetPick.disabled = Boolean(why);
  for (const button of [...dom.presetButtons.children, dom.runMix]) {
    if (!button) continue;
    const problem = button.dataset.preset ? presetProblem(presets.find((p) => p.name === button.dataset.preset), state.model) : null;
    button.disabled = Boolean(why || problem);  // a preset this server cannot run (no vLLM): disabled, saying why
    const title = why || problem || `${button.dataset.preset ? "run this preset" : "run the mix below"}${switching}`;
    if (button.title !== title) button.title = title;
  }
  const empty = emptyText(state, missingRun, viewOnly);
  if (dom.empty.textContent !== empty) dom.empty.textContent = empty;
  const preset = lessonPreset(presets, presetName, mix);
  const source = intro && !state.run ? (viewOnly ? FOLLOWING : INTRO) : preset ? String(preset.description || "")
    : mix.description || (mix.name !== "custom" ? mix.name : "Your own mix, from the editor below.");
  const { text: lesson, details } = hide && state.run
    ? { text: "Predict first: what will happen? This mix's lesson shows when the playhead reaches the end.", details: [] }
    : lessonParts(source, preset ? preset.name : mix.name, derived, preset ? preset.claims : null);
  if (dom.lesson.textContent !== lesson) dom.lesson.textContent = lesson;
  renderLessonMore(dom, lesson, details);
}

/** The toggle under the lesson (CSS keeps the lesson to two lines, one in Present): the whole lesson, and for each
 * claim the run did not bear out what happened, with its numbers, the noise and the step that strayed. */
function renderLessonMore(dom, lesson, details) {
  if (!dom.lessonMore) return;
  const key = JSON.stringify([lesson, details]);
  if (dom.lessonMore.dataset.key === key) return;
  dom.lessonMore.dataset.key = key;
  dom.lessonMore.hidden = !lesson;
  dom.lessonMore.dataset.why = String(details.length > 0);
  dom.lessonSummary.textContent = details.length ? `why this run differs from the lesson (${count(details.length, "claim")})`
    : "the whole lesson";
  dom.lessonFull.textContent = lesson;
  dom.lessonWhy.replaceChildren(...details.map((text) => el("li", { text })));
}
