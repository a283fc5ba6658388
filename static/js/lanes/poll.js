/**
 * Predict, then reveal — with the class's answers (app/runs/polls.py). Before a run the teacher asks one question (a
 * choice among a few answers, or a number) and names which of the run's figures answers it; each student answers on
 * their phone (again: the answer replaces theirs); the teacher's screen shows the live tally and how many answered.
 * The poll's run (the teacher's first run after asking) closes the answers, and once that run has finished and the
 * playhead has reached its end ("the reveal"), the tally is shown beside the run's own figure: read from the run's
 * metrics as the page computes them from the step records (core/metrics.js), never computed here.
 * The pure functions say what the panel reads; `createPoll` is a DOM widget class.js owns: it reads the poll of each
 * class_state and, each frame, the run on screen (`sync`), and sends poll events through `send`. Text via textContent.
 */
import { el } from "../ui/dom.js";
import { formatValue, metricOf } from "../core/columns.js";
import { ClientEvent, RunStatus } from "../core/vocab.js";

/** The figures a teacher may tie a poll to: metric keys of the metric table (catalog.js). */
export const FIGURES = Object.freeze(["steps", "wall_s", "mean_ttft_steps", "mean_ttft_ms", "mean_tpot_ms",
  "tokens_per_step", "slot_use"]);
const DASH = "\u2013";

function num(v) {
  return Number.isInteger(v) ? String(v) : String(Number(v.toFixed(2)));
}

/** "2 of 3 students answered" (the class's count from the teacher's own view). */
export function answeredText(poll, students) {
  const n = poll && poll.tally ? poll.tally.answered : 0;
  return `${n} of ${students} student${students === 1 ? "" : "s"} answered`;
}

/** What the class answered, without who: "static 1 · continuous 2"; "median 3.5 (middle half 3–4.25, all 2–9)". */
export function tallyText(poll) {
  const t = poll && poll.tally;
  if (!t) return "";
  if (poll.kind === "choice") return poll.choices.map((c, i) => `${c} ${t.counts[i]}`).join(" \u00b7 ");
  if (!t.answered) return "no answers yet";
  const half = t.q1 === t.q3 ? num(t.q1) : `${num(t.q1)}${DASH}${num(t.q3)}`;
  return `median ${num(t.median)} (middle half ${half}, all ${num(t.low)}${DASH}${num(t.high)})`;
}

/** A student's own answer as words: "continuous", "2.5", or "" before answering. */
export function yoursText(poll) {
  if (!poll || poll.yours === null || poll.yours === undefined) return "";
  return poll.kind === "choice" ? String(poll.choices[poll.yours] ?? "") : num(poll.yours);
}

/**
 * The run's answer to `poll`, from its metrics (`{lane: metrics}`, the page's own): `{text, lanes}` (a choice poll: the
 * lanes with the best figure, which choices name), `{text, value}` (a number poll), or null (no figure was named).
 */
export function runAnswer(poll, metrics) {
  const figure = poll && poll.figure;
  if (!figure) return null;
  const meta = metricOf(figure.metric);
  if (!meta) return { text: `this page has no figure \u201c${figure.metric}\u201d` };
  const shown = (v) => `${formatValue(v, meta.fmt)}${meta.unit === "%" || meta.fmt.endsWith("%") ? "" : ` ${meta.unit}`}`;
  const name = meta.label !== meta.unit && meta.label.endsWith(` ${meta.unit}`) ? meta.label.slice(0, -meta.unit.length - 1) : meta.label;
  if (poll.kind === "number") {
    const m = metrics[figure.lane];
    const v = m ? m[figure.metric] : undefined;
    if (v === null || v === undefined) return { text: `this run has no ${name} for \u201c${figure.lane}\u201d` };
    return { text: `${figure.lane}'s ${name}: ${shown(v)}`, value: v };
  }
  const lanes = Object.entries(metrics).filter(([, m]) => m[figure.metric] !== null && m[figure.metric] !== undefined);
  if (!lanes.length) return { text: `this run has no ${name}` };
  const values = lanes.map(([, m]) => m[figure.metric]);
  const best = meta.better === "higher" ? Math.max(...values) : Math.min(...values);
  const winners = lanes.filter(([, m]) => m[figure.metric] === best).map(([name]) => name);
  const rest = lanes.filter(([name]) => !winners.includes(name)).map(([name, m]) => `${name} ${shown(m[figure.metric])}`);
  const who = winners.length > 1 ? `a tie between ${winners.join(" and ")}` : `${winners[0]} first`;
  return { text: `${who} by ${name}: ${shown(best)}${rest.length ? ` (${rest.join(", ")})` : ""}`, lanes: winners };
}

/** The reveal's line: the class's tally beside the run's figure, and for a choice how many named the run's answer. */
export function revealText(poll, metrics) {
  const answer = runAnswer(poll, metrics);
  const right = answer && answer.lanes && poll.tally
    ? poll.choices.reduce((n, c, i) => n + (answer.lanes.includes(c) ? poll.tally.counts[i] : 0), 0) : null;
  return { answer: answer ? `The run: ${answer.text}` : "The run: no figure was named for this question",
    right: right === null ? "" : `${right} of ${poll.tally.answered} answered ${answer.lanes.join(" or ")}`,
    lanes: answer && answer.lanes ? answer.lanes : null };
}

export function createPoll(panel, { send, credentials }) {
  let poll = null;
  let students = 0;
  let role = null;
  let revealed = null;  // the run's metrics once its reveal came (the poll's run, finished, the playhead at its end)
  let revealedKey = null;
  const ask = el("button", { type: "button", id: "poll-ask", text: "Ask the class", hidden: true,
    title: "Ask a question before the run: students answer on their phones, the tally shows here and at the reveal" });
  const question = el("input", { id: "poll-question", value: "Which lane finishes first?", maxLength: 200, size: 36 });
  const kind = el("select", { id: "poll-kind" }, [el("option", { value: "choice", text: "one of these answers" }),
    el("option", { value: "number", text: "a number" })]);
  // the lanes' names fill in from the run on screen as the form opens (`autofill`), until the teacher types others
  const choices = el("input", { id: "poll-choices", size: 28, placeholder: "lane names, separated by commas",
    title: "The answers, separated by commas (2 to 8; lane names let the reveal mark the run's answer)" });
  const lane = el("input", { id: "poll-lane", size: 14, placeholder: "a lane's name", title: "The lane whose figure answers it" });
  let lanesOnScreen = [];
  let autofill = { choices: "", lane: "" };
  const metric = el("select", { id: "poll-metric" }, [el("option", { value: "", text: "no figure" }),
    ...FIGURES.map((key) => el("option", { value: key, text: metricOf(key).label }))]);
  metric.value = "steps";
  const error = el("p", { className: "poll-error", id: "poll-form-error", role: "alert" });
  const go = el("button", { type: "submit", id: "poll-submit", text: "Ask" });
  const cancel = el("button", { type: "button", text: "Cancel" });
  const laneLabel = el("label", { hidden: true }, ["of lane ", lane]);
  const choicesLabel = el("label", {}, ["Choices ", choices]);
  const form = el("form", { className: "qr-popover poll-form", id: "poll-form", ariaLabel: "ask the class", hidden: true }, [
    el("h2", { text: "Ask the class" }), el("label", {}, ["Question ", question]), el("label", {}, ["Students answer with ", kind]),
    choicesLabel,
    el("label", {}, ["At the reveal, compare with the run's ", metric]), laneLabel, error, go, cancel]);
  const head = el("p", { className: "poll-question", id: "poll-q" });
  const count = el("span", { className: "poll-count", id: "poll-count" });
  const tally = el("div", { className: "poll-tally", id: "poll-tally" });
  const answers = el("div", { className: "poll-answers", id: "poll-answers" });
  const reveal = el("p", { className: "poll-reveal", id: "poll-reveal", hidden: true });
  const stop = el("button", { type: "button", id: "poll-close", text: "Close answers", hidden: true });
  const note = el("p", { className: "poll-note", id: "poll-note", role: "status" });
  panel.replaceChildren(head, answers, tally, el("div", { className: "poll-foot" }, [count, stop]), reveal, note);

  const creds = () => credentials();
  ask.addEventListener("click", () => {
    form.hidden = !form.hidden;
    error.textContent = "";
    if (form.hidden || !lanesOnScreen.length) return;
    if (choices.value === autofill.choices) choices.value = autofill.choices = lanesOnScreen.join(", ");
    if (lane.value === autofill.lane) lane.value = autofill.lane = lanesOnScreen[lanesOnScreen.length - 1];
  });
  cancel.addEventListener("click", () => { form.hidden = true; });
  kind.addEventListener("change", () => {
    choicesLabel.hidden = kind.value === "number";
    laneLabel.hidden = kind.value !== "number";
  });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const list = choices.value.split(",").map((c) => c.trim()).filter(Boolean);
    const figure = metric.value ? { metric: metric.value, ...(kind.value === "number" ? { lane: lane.value.trim() } : {}) } : null;
    send(ClientEvent.POLL_OPEN, { ...creds(), question: question.value, kind: kind.value,
      ...(kind.value === "choice" ? { choices: list } : {}), ...(figure ? { figure } : {}) });
    error.textContent = "";  // the form stays open until the class has the new poll (a refusal is said in it)
  });
  stop.addEventListener("click", () => send(ClientEvent.POLL_CLOSE, creds()));
  answers.addEventListener("click", (e) => {
    const button = e.target.closest("button[data-choice]");
    if (button) answer(Number(button.dataset.choice));
  });
  answers.addEventListener("submit", (e) => {
    e.preventDefault();
    answer(Number(answers.querySelector("input").value));
  });
  function answer(value) {
    send(ClientEvent.POLL_ANSWER, { code: creds().code, poll: poll.id, answer: value });
  }

  let answersKey = "";
  /** A student's controls: a button per choice (its own pressed), or a number and Answer; none once closed. */
  function renderAnswers(student) {
    const key = JSON.stringify([student && poll.open, poll.id, poll.kind, poll.choices, poll.yours]);
    if (key === answersKey) return;
    answersKey = key;
    if (!student || !poll.open) { answers.replaceChildren(); return; }
    if (poll.kind === "choice") {
      answers.replaceChildren(...poll.choices.map((c, i) => el("button", { type: "button", className: "poll-choice",
        text: c, dataset: { choice: String(i) }, ariaPressed: String(poll.yours === i) })));
      return;
    }
    const unit = poll.figure && metricOf(poll.figure.metric) ? ` (${metricOf(poll.figure.metric).unit})` : "";
    const input = el("input", { type: "number", step: "any", id: "poll-number", ariaLabel: `your answer${unit}`,
      value: poll.yours ?? "" });
    answers.replaceChildren(el("form", { className: "poll-number" }, [input, el("span", { text: unit }),
      el("button", { type: "submit", text: "Answer" })]));
  }

  /** The class's answers: a choice poll's as a bar per choice (the run's answer marked at the reveal), a number
   * poll's in words; its text reads as tallyText says. */
  function renderTally(tallied, line) {
    if (!tallied) { tally.replaceChildren(); return; }
    if (poll.kind !== "choice") { tally.textContent = `The class: ${tallyText(poll)}`; return; }
    const most = Math.max(1, ...poll.tally.counts);
    const right = line && line.lanes ? line.lanes : [];
    tally.replaceChildren("The class: ", ...poll.choices.flatMap((c, i) => {
      const bar = el("span", { className: "poll-bar" });
      bar.style.width = `${(4 * poll.tally.counts[i]) / most}rem`;
      const item = el("span", { className: "poll-item", dataset: { right: String(right.includes(c)) } },
        [`${c} `, bar, String(poll.tally.counts[i])]);
      return i ? [" \u00b7 ", item] : [item];
    }));
  }

  function render() {
    const teacher = role === "teacher";
    const student = role === "student";
    ask.hidden = !teacher;
    if (!teacher) form.hidden = true;
    panel.hidden = !poll || !(teacher || student);
    if (panel.hidden) return;
    panel.dataset.open = String(poll.open);
    head.textContent = poll.question;
    renderAnswers(student);
    const tallied = Boolean(poll.tally) && (teacher || !poll.open);
    const line = revealed && tallied ? revealText(poll, revealed) : null;
    renderTally(tallied, line);
    count.textContent = teacher ? answeredText(poll, students) + (poll.open ? "" : " \u00b7 answers closed") : "";
    stop.hidden = !teacher || !poll.open;
    reveal.hidden = !line;
    reveal.textContent = line ? [line.answer, line.right].filter(Boolean).join(" \u2014 ") : "";
    const yours = yoursText(poll);
    note.textContent = teacher ? (poll.open ? "Answers close when the run starts." : "")
      : poll.open ? (yours ? `Your answer: ${yours} \u2014 you may change it until the run starts.` : "Your answer?")
        : yours ? `Your answer: ${yours}. Answers are closed.` : "Answers are closed.";
  }
  render();

  return {
    /** The tools for the class bar (the teacher's button and its form). */
    controls: [ask, form],
    /** A class_state: its poll (a student's own answer is kept for the poll it answered), role and students. */
    update(next, state) {
      const same = poll && next && next.id === poll.id;
      if (next && !same) form.hidden = true;  // the poll just asked
      poll = next ? { ...next, yours: "yours" in next ? next.yours : same ? poll.yours : null } : null;
      if (!same) revealed = revealedKey = null;
      role = state.role;
      students = state.students || 0;
      render();
    },
    /** A refusal about the poll (a run_error naming one of its fields): said under it, or in the form. */
    refused(message) {
      error.textContent = message;
      note.textContent = message;
    },
    /** Each frame: the run on screen; `view`: its metrics and whether its reveal came (finished, the playhead at the end). */
    sync(run, view) {
      lanesOnScreen = run && run.lanes ? run.lanes : lanesOnScreen;
      const now = poll && run && run.id === poll.run_id && run.status === RunStatus.FINISHED && view && view.seen;
      const key = now ? `${poll.id}|${run.id}` : null;
      if (key === revealedKey) return;
      revealedKey = key;
      revealed = now ? view.metrics : null;
      render();
    },
    /** What tests read (window.__class.poll). */
    get info() { return poll ? { ...poll, revealed: Boolean(revealed) } : null; },
  };
}
