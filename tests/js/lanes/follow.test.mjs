// A student's page follows the teacher's run while its own run is live (issue 38): its own run is kept in `mine`,
// its events still fold into it, a new mix cancels it first (never a refused submit), and it is one action away.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Action, applyEvent, createState, liveOwnRun, nextSend } from "../../../static/js/lanes/state.js";
import { ConnectionEvent, RunStatus, ServerEvent } from "../../../static/js/core/vocab.js";
import { behindText } from "../../../static/js/lanes/class.js";

const MIX = { name: "mixed", slots: 4, requests: [] };

function queuedOwn() {
  let s = createState();
  s = applyEvent(s, { type: ConnectionEvent.CONNECTED });
  s = applyEvent(s, { type: ServerEvent.MODEL_STATUS, payload: { ready: true } });
  s = applyEvent(s, { type: Action.WANTED, payload: { workload: MIX, lanes: ["static"] } });
  s = applyEvent(s, { type: Action.SUBMITTED });
  return applyEvent(s, { type: ServerEvent.RUN_QUEUED, payload: { run_id: "mine1", position: 2 } });
}

test("following the teacher's run keeps a queued own run live, one action away", () => {
  let s = applyEvent(queuedOwn(), { type: Action.WATCHING, payload: { run_id: "teacher1" } });
  assert.equal(s.run.id, "teacher1");
  assert.equal(s.run.own, false);
  assert.equal(s.mine.id, "mine1");
  assert.equal(liveOwnRun(s).id, "mine1");
  s = applyEvent(s, { type: ServerEvent.RUN_QUEUED, payload: { run_id: "mine1", position: 1 } });
  assert.equal(s.mine.position, 1);                 // its position still counts
  assert.equal(s.run.id, "teacher1");
  s = applyEvent(s, { type: ServerEvent.RUN_STARTED, payload: { run_id: "mine1", lanes: ["static"], workload: MIX } });
  s = applyEvent(s, { type: ServerEvent.TICK, payload: { run_id: "mine1", t: 1, lanes: { static: { step: 1 } } } });
  assert.equal(s.mine.status, RunStatus.RUNNING);
  assert.equal(s.mine.records.static.length, 1);
  // another preset: our live run is cancelled first, then submitted
  s = applyEvent(s, { type: Action.WANTED, payload: { workload: { ...MIX, name: "same" }, lanes: ["static"] } });
  assert.deepEqual(nextSend(s), { type: "cancel", runId: "mine1" });
  const shown = applyEvent(s, { type: Action.SHOW_MINE });
  assert.equal(shown.run.id, "mine1");
  assert.equal(shown.run.own, true);
  assert.equal(shown.mine, null);
});

test("a cancel of our kept run (the teacher's, say) ends it without touching the run on screen", () => {
  let s = applyEvent(queuedOwn(), { type: Action.WATCHING, payload: { run_id: "teacher1" } });
  s = applyEvent(s, { type: ServerEvent.RUN_ERROR, payload: { run_id: "mine1", code: "cancelled",
    message: "run mine1 cancelled: cancelled by the teacher" } });
  assert.equal(s.mine.status, RunStatus.ERROR);
  assert.equal(s.run.id, "teacher1");
  assert.equal(s.error, null);
  assert.match(s.mine.ended, /cancelled by the teacher/);
  assert.equal(liveOwnRun(s), null);
});

test("a queued class run's wording counts the executing run: position 5 is behind five runs (issue 38)", () => {
  assert.equal(behindText({ teacher: 0, student: 0, other: 0 }), "next, once the running run ends");
  assert.equal(behindText({ teacher: 1, student: 2, other: 1 }),
    "behind the running run, the teacher's run, 2 student runs and 1 other run");
  assert.equal(behindText({ student: 4 }), "behind the running run and 4 student runs");
});

test("the first screen says \"Pick a preset above\" once: in the lesson line, not again in the narration or the placeholder", async () => {
  const { readFileSync } = await import("node:fs");
  const { INTRO, emptyText } = await import("../../../static/js/lanes/status.js");
  const { narrate } = await import("../../../static/js/lanes/narration.js");
  let s = applyEvent(createState(), { type: ConnectionEvent.CONNECTED });
  s = applyEvent(s, { type: ServerEvent.MODEL_STATUS, payload: { ready: true } });
  const html = readFileSync(new URL("../../../templates/index.html", import.meta.url), "utf8");
  const placeholder = html.match(/<p class="empty" id="empty">([^<]*)<\/p>/)[1];
  const screen = [INTRO, narrate([], "steps", 0, false), emptyText(s, ""), placeholder];
  assert.equal(screen.filter((text) => /pick a preset above/i.test(text)).length, 1, screen.join("\n"));
  assert.equal(placeholder, emptyText(s, ""), "the server's placeholder is the page's own");
});

test("a #mix= link says it starts a live run for everyone who opens it; a run's copied link says it replays (issue 38)", async () => {
  const { startLine } = await import("../../../static/js/lanes/narration.js");
  const { REPLAY_NOTE } = await import("../../../static/js/lanes/share.js");
  const line = startLine({ linkMix: "my mix", ready: true });
  assert.match(line, /starts a live run of \u201cmy mix\u201d now/);
  assert.match(line, /everyone who opens it starts a run of their own/);
  assert.match(line, /\/runs\/\u2026\), which replays it/);
  assert.match(REPLAY_NOTE, /^a replay of this run: everyone who opens it sees these same steps/);
});
