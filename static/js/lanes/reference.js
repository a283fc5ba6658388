/**
 * Reference runs on the page (app/web/references.py): "Record reference" runs the chosen preset live and, once that
 * run has finished and been stored, keeps it as the preset's reference on the server; "Play the reference run"
 * opens that stored run (/runs/<id>), which the page replays; a run on screen that is a reference is marked as a
 * replay with the date it was recorded, and the preset's own button still starts a live run. The socket and the
 * loop know nothing of it: `update` is called once a frame with what the page shows and rewrites only what
 * changed. Text only through textContent.
 */
import { el } from "../ui/dom.js";

/** "2026-12-01 22:10 UTC" from the server's "2026-12-01T22:10:05Z". */
export function referenceDate(iso) {
  const m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})/.exec(String(iso || ""));
  return m ? `${m[1]} ${m[2]} UTC` : String(iso || "");
}

/** The preset whose reference `runId` is (null: none), from {preset: {run_id, recorded_at}}. */
export function referenceOf(refs, runId) {
  const found = Object.entries(refs || {}).find(([, r]) => r.run_id === runId);
  return found ? { preset: found[0], ...found[1] } : null;
}

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

/** The reference controls in `container`; `runPreset(name)` starts a live run of a preset as its button does;
 * `member()` is the class this page is in ({role, credentials}: class.js), since while a class is open only its
 * teacher records (a student's page shows no Record button; the server refuses anyone else). */
export function createReferences(container, { runPreset, member = () => ({ role: null, credentials: {} }),
  fetchImpl = (...a) => fetch(...a) }) {
  let refs = {};
  let recording = null;  // {preset, before: the run id on screen when Record was pressed}
  let note = "";
  let preset = null;
  const record = el("button", { type: "button", id: "record-reference", text: "Record reference",
    title: "run this preset live now and keep that run as its reference, to replay in class" });
  const play = el("a", { id: "play-reference", className: "reference-play", href: "#" });
  const mark = el("span", { id: "reference-mark", className: "reference-mark" });
  mark.setAttribute("role", "status");
  container.replaceChildren(record, play, mark);

  async function load() {
    try {
      const answer = await fetchImpl("/api/references");
      if (answer.ok) refs = (await answer.json()).references || {};
    } catch { /* no references shown: the page works without them */ }
  }

  async function keep(name, runId) {
    try {
      const answer = await fetchImpl(`/api/references/${encodeURIComponent(name)}`, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ run_id: runId, ...member().credentials }) });
      const body = await answer.json();
      if (!answer.ok) note = `The reference was not kept: ${body.error || answer.status}`;
      else {
        refs = { ...refs, [name]: { run_id: body.run_id, recorded_at: body.recorded_at } };
        note = `Kept as the reference run of \u201c${name}\u201d (recorded ${referenceDate(body.recorded_at)}).`;
      }
    } catch (e) {
      note = `The reference was not kept: ${e.message || e}`;
    }
  }

  record.addEventListener("click", () => {
    if (!preset) return;
    recording = { preset, before: container.dataset.runId || null };
    note = `Recording a reference of \u201c${preset}\u201d: a live run, kept once it finishes\u2026`;
    runPreset(preset);
  });
  load();

  /** One frame: `presetName` the chosen preset (or null), `run` the run on screen, `ready` whether runs may start. */
  function update({ presetName, run, ready }) {
    preset = presetName || null;
    container.dataset.runId = run ? run.id : "";
    if (recording && run && run.id !== recording.before && run.own && run.workload && run.workload.name === recording.preset) {
      if (run.status === "finished") {
        const name = recording.preset;
        recording = null;
        keep(name, run.id);
      } else if (run.status === "cancelled" || run.status === "error") {
        recording = null;
        note = "Recording stopped: the run did not finish, so no reference was kept.";
      }
    }
    record.hidden = member().role === "student";
    record.disabled = !preset || !ready || Boolean(recording);
    setText(record, preset && refs[preset] ? "Record reference again" : "Record reference");
    const ref = preset ? refs[preset] : null;
    const shown = run && !run.own ? referenceOf(refs, run.id) : null;  // a reference replayed (not the one just recorded)
    play.hidden = !ref || Boolean(run && run.id === ref.run_id);
    if (ref) {
      const href = `/runs/${encodeURIComponent(ref.run_id)}#preset=${encodeURIComponent(preset)}`;
      if (play.getAttribute("href") !== href) play.setAttribute("href", href);
      setText(play, `Play the reference run (recorded ${referenceDate(ref.recorded_at)})`);
    }
    mark.dataset.replay = String(Boolean(shown));
    setText(mark, shown ? `Reference run recorded ${referenceDate(shown.recorded_at)}: a replay of a stored run of`
      + ` \u201c${shown.preset}\u201d, not a live one \u2014 press a preset for a live run.` : note);
  }
  return { update, references: () => refs };
}
