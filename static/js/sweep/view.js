/**
 * The sweep page's status around the charts: the model-loading bar (model_status, as on the main
 * page), the sweep line (queued, running, finished, cancelled, an error), the progress bar with the
 * rate now running and the rates done, the Run and Cancel buttons, and the cost note. It reads the
 * state and writes text through textContent; it changes nothing else.
 */
import { traitsOf } from "../core/policies.js";
import { SweepStatus, canCancel, whyNotSubmit } from "./state.js";

const SIMULATED = "SIMULATED: no model ran. Step times come from the simulator's cost model, so every TTFT, TPOT and "
  + "goodput here is the cost model's, not this machine's; its tokens are placeholders.";

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

function modelLine(m) {
  if (m.error) return `Model failed to load: ${m.error}`;
  if (m.ready) return `${m.model || "model"} on ${m.device || "?"}, ready`;
  return `Loading ${m.model || "the model"}: ${m.message || ""} ${Math.round((m.progress || 0) * 100)}%`;
}

/** The reason in a server's "run <id> cancelled: <reason>" (the line already names the sweep). */
const ending = (reason) => String(reason || "").replace(/^run \S+ \w+: /, "");

/** [text, tone] of the sweep line. */
function sweepLine(state) {
  const s = state.sweep;
  if (!state.connected) return [s ? "Reconnecting to the server\u2026 (a live sweep is rejoined)" : "Connecting to the server\u2026", "warn"];
  if (state.pending) return ["Sending the sweep to the engine\u2026", ""];
  if (!s) return ["No sweep yet. Choose a mix and rates above, then Run sweep. On a CPU a sweep takes minutes: every rate runs "
    + "the whole mix on every lane.", ""];
  const on = s.simulated ? "the simulator (SIMULATED)" : s.model || "the model";
  const done = `${s.points.length} of ${s.rates.length || "?"} rates done`;
  switch (s.status) {
    case SweepStatus.QUEUED:
      return [s.position ? `Queued: position ${s.position} in the engine's queue (1 = next); it starts when the runs ahead finish.`
        : "Joining the sweep\u2026", "warn"];
    case SweepStatus.RUNNING:
      return [`Sweeping on ${on}: ${s.rate !== null ? `${s.rate} req/s running, ` : ""}${done}. On a CPU this takes minutes; `
        + "each point appears when its rate has run on every lane.", ""];
    case SweepStatus.FINISHED:
      return [`Finished on ${on}: ${s.points.length} rates \u00d7 ${s.lanes.length} lanes.`, "ok"];
    case SweepStatus.CANCELLED:
      return [`Cancelled after ${done} (${ending(s.reason) || "stopped"}); the points so far stay.`, "warn"];
    default:
      if (s.notSweep) return [`${s.id} is a run, not a sweep: the link on the right replays it.`, "error"];
      return [s.reason || "The sweep ended with an error.", "error"];  // a failure keeps the server's whole message
  }
}

function progressText(s) {
  if (!s || s.status === SweepStatus.QUEUED || s.notSweep) return "";
  const pct = `${Math.round(s.fraction * 100)}%`;
  const running = s.status === SweepStatus.RUNNING && s.rate !== null ? ` \u00b7 running ${s.rate} req/s` : "";
  return `${pct}${running} \u00b7 ${s.points.length} / ${s.rates.length || "?"} rates done`;
}

/** The lanes that start a group only once it is full (static's traits): their p95 TTFT can fall as the rate rises. */
function groupNote(s) {
  const configs = s ? (s.laneConfigs.length ? s.laneConfigs : s.lanes) : [];
  const full = configs.filter((c) => traitsOf(typeof c === "string" ? c : c.policy).waits_for === "full")
    .map((c) => (typeof c === "string" ? c : c.name));
  if (!full.length) return "";
  return `Why ${full.join(" and ")}'s p95 TTFT can fall as the rate rises: such a lane starts a group only when all its `
    + "slots' requests have arrived, so at a low rate the first requests wait for the last ones to arrive; at a higher "
    + "rate the group fills sooner. A lane that admits into any free slot (continuous) does not wait, so its TTFT "
    + "rises with the rate as the queue grows.";
}

/** Refresh every status element from `state`; `summary` is the form's {rates, lanes, requests}. */
export function renderView(dom, state, summary) {
  const m = state.model;
  dom.modelStatus.dataset.ready = String(Boolean(m.ready));
  dom.modelStatus.dataset.error = m.error ? "true" : "false";
  setText(dom.modelText, modelLine(m));
  dom.modelProgress.value = m.ready ? 1 : Number(m.progress) || 0;
  dom.modelProgress.hidden = Boolean(m.ready);

  const [line, tone] = sweepLine(state);
  setText(dom.status, line);
  dom.status.dataset.tone = tone;
  const s = state.sweep;
  dom.simBanner.hidden = !(s && s.simulated);
  setText(dom.simBanner, s && s.simulated ? SIMULATED : "");
  const note = groupNote(s);
  dom.groupNote.hidden = !note;
  setText(dom.groupNote, note);
  dom.progress.value = s ? s.fraction : 0;
  dom.progress.dataset.status = s ? s.status : "idle";
  dom.progressRow.hidden = !s || s.notSweep;
  setText(dom.progressText, progressText(s));
  if (s && s.notSweep) dom.mainLink.href = `/runs/${encodeURIComponent(s.id)}`;
  setText(dom.mainLink, s && s.notSweep ? "open that run" : "back to the lanes");

  const why = whyNotSubmit(state);
  dom.run.disabled = Boolean(why);
  dom.run.title = why || "run the mix at every rate on every ticked lane";
  dom.cancel.disabled = !canCancel(state);
  setText(dom.cancel, s && s.cancelling ? "Cancelling\u2026" : "Cancel");
  dom.cancel.title = canCancel(state) ? "stop this sweep; the points so far stay" : "only the page that started a running sweep can cancel it";

  const total = summary.rates * summary.lanes * summary.requests;
  const cost = dom.backend.value === "sim" ? "on the simulator that takes seconds (SIMULATED)" : "on a CPU that takes minutes";
  setText(dom.costNote, total ? `${summary.rates} rates \u00d7 ${summary.lanes} lanes \u00d7 ${summary.requests} requests = `
    + `${total} requests to compute: ${cost}.` : "");
}
