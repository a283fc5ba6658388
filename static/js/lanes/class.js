/**
 * A class (app/runs/classes.py) as the page takes part in it. The teacher's page opens one (a short code, the
 * link /c/<code>, its QR code), may allow students to submit, sees how many students joined and the class's
 * queued and executing runs (each with a Stop button), may lock students' submits for a demo and pause the run on
 * its screen (every page watching it says so: status.js), shows the code
 * large (beside the class QR) and closes it; its token stays in sessionStorage, so a reload rejoins as the teacher.
 * A student's page (/c/<code>) joins it and follows every run the teacher starts: `onEvent` answers which run to
 * watch, and main.js watches it even while the student's own run is live (state.js keeps that one in `mine`); the
 * student's bar then offers "your run" one click away, and the teacher's run again from the student's own. A DOM
 * widget: it never touches the run state; it reads class events main.js hands it (and, each frame, which run is
 * shown: `sync`), and sends class events through `send`. The class's poll (poll.js: the teacher asks, students
 * answer, the tally beside the run's figure at the reveal) is its own widget, in `poll`, which this one feeds.
 */
import { el } from "../ui/dom.js";
import { createPoll } from "./poll.js";
import { publicLink, shareInfo, showWarning } from "./publicurl.js";
import { ClientEvent, RunStatus, ServerEvent } from "../core/vocab.js";

const KEY = "batch-lanes-class";  // sessionStorage: {code, token} of the class this tab teaches
const POLL_FIELDS = new Set(["poll", "answer", "question", "kind", "choices", "figure", "figure.metric", "figure.lane",
  "poll_open", "poll_answer", "poll_close"]);  // a run_error about the poll names one of these

/** "behind the running run, the teacher's run and 1 student run": whose runs are ahead of a class's queued run. Its
 * position counts the queued runs ahead of it plus one, the run executing now, which it names first: position 5 is
 * behind five runs, never "four others". */
export function behindText(ahead) {
  const n = (k) => Number(ahead && ahead[k]) || 0;
  const runs = (count, what) => `${count} ${what} run${count === 1 ? "" : "s"}`;
  const parts = [];
  if (n("teacher")) parts.push(n("teacher") === 1 ? "the teacher's run" : `${n("teacher")} of the teacher's runs`);
  if (n("student")) parts.push(runs(n("student"), "student"));
  if (n("other")) parts.push(runs(n("other"), "other"));
  if (!parts.length) return "next, once the running run ends";
  const all = ["the running run", ...parts];
  return `behind ${all.slice(0, -1).join(", ")} and ${all[all.length - 1]}`;
}

function stored() {
  try {
    const v = JSON.parse(sessionStorage.getItem(KEY) || "null");
    return v && typeof v.code === "string" && typeof v.token === "string" ? v : null;
  } catch (e) {
    return null;
  }
}

function store(value) {
  try {
    if (value) sessionStorage.setItem(KEY, JSON.stringify(value));
    else sessionStorage.removeItem(KEY);
  } catch (e) { /* no storage: a reload starts without the class */ }
}

/** What a student's bar says of its own run kept aside: "your run “mixed”: queued, position 2". */
export function mineText(mine) {
  if (!mine) return "";
  const named = mine.workload ? mine.workload.name : mine.name;
  const name = named ? `\u201c${named}\u201d` : "";
  const where = mine.ended ? (/by the teacher/.test(mine.ended) ? "stopped by the teacher" : "ended")
    : mine.status === "queued" ? `queued${mine.position ? `, position ${mine.position}` : ""}`
      : mine.status === "running" ? "running" : mine.status === "finished" ? "finished" : String(mine.status || "");
  return `your run ${name}${name ? ": " : ""}${where}`;
}

/** The teacher's Pause button for the run on its screen (issue 38): shown while that run runs, "Pause run", or
 * "Resume run" while it is paused; `paused`: what a click asks the server for (class_pause). Pure. */
export function pauseControl(role, run) {
  const live = Boolean(role === "teacher" && run && run.id && run.status === RunStatus.RUNNING);
  const paused = Boolean(run && run.paused);
  return { hidden: !live, text: paused ? "Resume run" : "Pause run", paused: !paused, runId: live ? run.id : null };
}

export function createClass(root, { send, code: pageCode = "", missing = "", poll: pollPanel = null, onShowMine = () => {},
  onShowTeacher = () => {} }) {
  let info = { role: pageCode ? "student" : null, code: pageCode || null, students: 0, allow_submit: false, locked: false,
    run_id: null, queued: [], running: [],
    ended: missing ? `No class ${missing} is open: check the code, or ask the teacher for the link.` : null };
  const open = el("button", { type: "button", id: "btn-class", text: "Open a class",
    title: "Students join by a short code or link and watch your runs; theirs queue behind yours" });
  const text = el("span", { id: "class-info", className: "class-info", role: "status" });
  const allow = el("input", { type: "checkbox", id: "class-allow" });
  const allowLabel = el("label", { className: "switch", hidden: true, title: "Let students submit runs of their own: they queue behind yours" },
    [allow, " students may submit"]);
  const lock = el("input", { type: "checkbox", id: "class-lock" });
  const lockLabel = el("label", { className: "switch", hidden: true,
    title: "Lock students' submits for now (a demo): a submit is refused with a message; queued runs stay queued" },
  [lock, " lock submits"]);
  const runs = el("span", { id: "class-runs", className: "class-runs", hidden: true });  // students' runs, each with Stop
  const pause = el("button", { type: "button", id: "class-pause", hidden: true,
    title: "Pause the run on screen (its lanes wait; it goes on by itself after 2 minutes), or resume it" });
  let pauseAsk = pauseControl(null, null);
  const codeBadge = el("span", { id: "class-code", className: "class-code", hidden: true, title: "The class code: students type it at /c/CODE" });
  const view = el("span", { id: "class-view", className: "class-view", hidden: true });   // a student's: whose run is shown
  const viewMine = el("button", { type: "button", id: "class-show-mine", hidden: true });
  const viewTeacher = el("button", { type: "button", id: "class-show-teacher", text: "watch the teacher's run", hidden: true });
  const qr = el("button", { type: "button", id: "class-qr", text: "class code & QR", hidden: true });
  const close = el("button", { type: "button", id: "class-close", text: "Close class", hidden: true });
  const frame = el("div", { className: "qr-frame" });  // its image is made when first opened (no image before)
  const url = el("p", { className: "qr-url", id: "class-url" });
  const warning = el("p", { className: "qr-warning", id: "class-qr-warning", hidden: true });
  const shut = el("button", { type: "button", text: "Close" });
  const bigCode = el("p", { className: "class-code-big", id: "class-code-big" });  // read off the projector from the back
  const popover = el("div", { className: "qr-popover", id: "class-qr-popover", role: "dialog", ariaLabel: "class QR code", hidden: true },
    [el("h2", { text: "Join the class on your phone" }), bigCode, frame, url, warning, shut]);
  const poll = pollPanel && createPoll(pollPanel, { send, credentials: () => ({ code: info.code, token: token() }) });
  root.replaceChildren(open, codeBadge, text, view, viewMine, viewTeacher, allowLabel, lockLabel, pause, runs, ...(poll ? poll.controls : []),
    qr, close, popover);

  const token = () => (stored() || {}).token;
  open.addEventListener("click", () => send(ClientEvent.CLASS_OPEN, {}));
  allow.addEventListener("change", () => send(ClientEvent.CLASS_ALLOW, { code: info.code, token: token(), allow: allow.checked }));
  lock.addEventListener("change", () => send(ClientEvent.CLASS_LOCK, { code: info.code, token: token(), locked: lock.checked }));
  close.addEventListener("click", () => send(ClientEvent.CLASS_CLOSE, { code: info.code, token: token() }));
  runs.addEventListener("click", (e) => {
    const stop = e.target.closest("button[data-run]");
    if (stop) send(ClientEvent.CLASS_CANCEL, { code: info.code, token: token(), run_id: stop.dataset.run });
  });
  pause.addEventListener("click", () => {
    if (pauseAsk.runId) send(ClientEvent.CLASS_PAUSE, { code: info.code, token: token(), run_id: pauseAsk.runId, paused: pauseAsk.paused });
  });
  viewMine.addEventListener("click", () => onShowMine());
  viewTeacher.addEventListener("click", () => { if (info.run_id) onShowTeacher(info.run_id); });
  qr.addEventListener("click", () => {
    if (!popover.hidden) { popover.hidden = true; return; }
    const img = frame.querySelector("img") || frame.appendChild(el("img", { id: "class-qr-img", width: 320, height: 320,
      alt: "QR code of the class link" }));
    img.src = `/c/${encodeURIComponent(info.code)}/qr.svg`;
    bigCode.textContent = info.code;
    shareInfo().then((share) => {
      url.textContent = publicLink(share, `/c/${info.code}`);
      showWarning(warning, share);
    });
    popover.hidden = false;
  });
  shut.addEventListener("click", () => { popover.hidden = true; });

  function render() {
    const teacher = info.role === "teacher";
    const student = info.role === "student";
    document.body.dataset.classRole = info.role || "";
    document.body.dataset.classSubmit = String(Boolean(info.allow_submit));
    open.hidden = Boolean(info.role);
    document.body.dataset.classLocked = String(Boolean(info.locked));
    allowLabel.hidden = lockLabel.hidden = runs.hidden = codeBadge.hidden = !teacher;
    qr.hidden = close.hidden = !teacher;
    allow.checked = Boolean(info.allow_submit);
    lock.checked = Boolean(info.locked);
    codeBadge.textContent = teacher ? info.code : "";
    renderRuns(teacher);
    if (!teacher) popover.hidden = true;
    const waiting = (info.queued || []).filter((r) => r.role === "student").length;
    text.textContent = info.ended ? info.ended
      : teacher ? `Class \u00b7 /c/${info.code} \u00b7 ${info.students} student${info.students === 1 ? "" : "s"}`
        + ` \u00b7 ${waiting} student run${waiting === 1 ? "" : "s"} queued`
        + (waiting ? ` (positions ${(info.queued || []).filter((r) => r.role === "student").map((r) => r.position).join(", ")})` : "")
      : student ? `Class ${info.code}: you watch the teacher's runs`
        + (info.allow_submit && info.locked ? " (the teacher has locked submits for now)"
          : info.allow_submit ? "; you may run your own (they queue behind the teacher's)" : " (view only)")
      : "";
  }
  let runsKey = "";
  /** The teacher's list of its students' runs, executing then queued, each with a Stop button. */
  function renderRuns(teacher) {
    const list = teacher ? [...(info.running || []).map((r) => ({ ...r, where: "running" })),
      ...(info.queued || []).map((r) => ({ ...r, where: `queued ${r.position}` }))].filter((r) => r.role === "student") : [];
    const key = JSON.stringify(list);
    if (key === runsKey) return;
    runsKey = key;
    runs.replaceChildren(...list.map((r) => el("span", { className: "class-run", dataset: { where: r.where } }, [
      `${r.name || "a mix"} (${r.where}) `,
      el("button", { type: "button", className: "class-stop", dataset: { run: r.run_id }, text: "Stop",
        title: "Stop this student's run (queued or executing): it ends, and the student's page says so" })])));
  }

  render();

  let viewKey = "";
  /** A student's bar: whose run the lanes show, with the other (its own kept run, the teacher's) one click away. */
  function renderView(run, mine) {
    const student = info.role === "student";
    const teachers = Boolean(student && run && info.run_id && run.id === info.run_id);
    const own = Boolean(student && run && run.own);
    const words = !student ? "" : teachers ? "Showing the teacher's run" : own ? "Showing your own run" : "";
    const mineWords = student && mine ? mineText(mine) : "";
    const key = [words, mineWords, own && info.run_id && !teachers].join("|");
    if (key === viewKey) return;
    viewKey = key;
    view.hidden = !words;
    view.textContent = words;
    view.dataset.whose = teachers ? "teacher" : own ? "mine" : "";
    viewMine.hidden = !mineWords;
    viewMine.textContent = mineWords ? `${mineWords} \u2014 show it` : "";
    viewTeacher.hidden = !(student && info.run_id && !teachers);
  }

  let shown = null;  // the run this page shows (its last run_started)
  /** A teacher's page showing a run its class does not (a stored run: a reference replay) has its students watch
   * it too; a run the teacher submitted is the class's run already. */
  function showToStudents() {
    if (info.role === "teacher" && shown && shown !== info.run_id && token()) {
      send(ClientEvent.CLASS_SHOW, { code: info.code, token: token(), run_id: shown });
    }
  }

  return {
    /** The socket (re)connected: rejoin the class this page is in (a reload of the teacher's page too). */
    connected() {
      const mine = stored();
      if (mine && (!pageCode || pageCode === mine.code)) send(ClientEvent.CLASS_JOIN, { code: mine.code, token: mine.token });
      else if (pageCode && !info.ended) send(ClientEvent.CLASS_JOIN, { code: pageCode });
    },
    /** A class event (or a refusal about one); returns the id of a run to watch (the teacher's new run), or null. */
    onEvent(event) {
      const p = event.payload || {};
      if (event.type === ServerEvent.RUN_STARTED && p.run_id) {
        shown = p.run_id;   // the run on this page's screen, which a teacher's page shows its students too
        showToStudents();
        return null;
      }
      if (event.type === ServerEvent.CLASS_STATE) {
        const follow = p.role === "student" && p.run_id && p.run_id !== info.run_id ? p.run_id : null;
        if (p.role === "teacher") store({ code: p.code, token: p.token });
        info = { ...info, ...p, ended: null };
        render();
        if (poll) poll.update(p.poll || null, info);
        showToStudents();
        return follow;
      }
      if (poll && event.type === ServerEvent.RUN_ERROR && !p.run_id && POLL_FIELDS.has(p.field)) poll.refused(p.message);
      if (event.type === ServerEvent.CLASS_CLOSED || (event.type === ServerEvent.RUN_ERROR && !p.run_id
          && (p.field === "code" || p.field === "token"))) {
        if (info.role === "teacher" || stored()) store(null);
        info = { role: null, code: null, students: 0, allow_submit: false, locked: false, run_id: null, queued: [], running: [],
          ended: p.message || "The class ended." };
        render();
        if (poll) poll.update(null, info);
      }
      return null;
    },
    /** What a request only a class's teacher may make carries: {class, token} on the teacher's page, {class} on a
     * student's, {} outside a class (the server refuses all but the teacher while a class is open). */
    credentials() {
      if (info.role === "teacher" && token()) return { class: info.code, token: token() };
      return info.role === "student" ? { class: info.code } : {};
    },
    /** Each frame: the run the lanes show and our own run kept aside (state.js `mine`), for a student's bar; `view`:
     * that run's metrics and whether its reveal came, for the poll (poll.js). */
    sync(run, mine, view) {
      renderView(run, mine);
      pauseAsk = pauseControl(info.role, run);
      if (pause.hidden !== pauseAsk.hidden) pause.hidden = pauseAsk.hidden;
      if (pause.textContent !== pauseAsk.text) pause.textContent = pauseAsk.text;
      if (poll) poll.sync(run, view);
    },
    /** A submit the page should not send: the class's submits are locked (the server would refuse it too). */
    locked() { return info.role === "student" && Boolean(info.locked); },
    /** "teacher", "student" or null (not in a class). */
    get role() { return info.role; },
    /** What tests read (window.__class). */
    get info() { return { ...info, poll: poll ? poll.info : null }; },
  };
}
