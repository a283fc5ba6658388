// The teacher's pause of the run on screen (issue 38), on the page without a browser: run_paused folds into the run
// its page shows (and into a student's own run kept aside), the run line says "paused by the teacher" while its lanes
// wait, and the teacher's Pause button shows only over a running run, asking for the other state.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Action, applyEvent, createState } from "../../../static/js/lanes/state.js";
import { ConnectionEvent, RunStatus, ServerEvent } from "../../../static/js/core/vocab.js";
import { pauseControl } from "../../../static/js/lanes/class.js";
import { runLine } from "../../../static/js/lanes/status.js";

const MIX = { name: "mixed", slots: 4, requests: [] };

function watching(runId) {
  let s = createState();
  s = applyEvent(s, { type: ConnectionEvent.CONNECTED });
  s = applyEvent(s, { type: ServerEvent.MODEL_STATUS, payload: { ready: true } });
  s = applyEvent(s, { type: Action.WATCHING, payload: { run_id: runId } });
  return applyEvent(s, { type: ServerEvent.RUN_STARTED, payload: { run_id: runId, lanes: ["static"], workload: MIX } });
}

test("run_paused folds into the run on screen and the run line says the teacher paused it, then that it runs", () => {
  let s = watching("teacher1");
  assert.equal(s.run.status, RunStatus.RUNNING);
  s = applyEvent(s, { type: ServerEvent.RUN_PAUSED, payload: { run_id: "teacher1", paused: true, reason: "paused by the teacher" } });
  assert.equal(s.run.paused, "paused by the teacher");
  assert.deepEqual(runLine(s, false, false), ["Paused by the teacher: the lanes wait until the run is resumed.", "warn"]);
  assert.deepEqual(runLine(s, false, true), ["Paused by the teacher.", "warn"]);  // Present's one short line
  s = applyEvent(s, { type: ServerEvent.RUN_PAUSED, payload: { run_id: "teacher1", paused: false, reason: "resumed by the teacher" } });
  assert.equal(s.run.paused, null);
  assert.match(runLine(s, false, false)[0], /^Running on the model: /);
  const other = applyEvent(s, { type: ServerEvent.RUN_PAUSED, payload: { run_id: "another", paused: true } });
  assert.equal(other, s);                           // another run's pause changes nothing on this page
});

test("a student's own run kept aside takes its pause too, and the run on screen is left alone", () => {
  let s = createState();
  s = applyEvent(s, { type: ConnectionEvent.CONNECTED });
  s = applyEvent(s, { type: Action.WANTED, payload: { workload: MIX, lanes: ["static"] } });
  s = applyEvent(s, { type: Action.SUBMITTED });
  s = applyEvent(s, { type: ServerEvent.RUN_QUEUED, payload: { run_id: "mine1", position: 1 } });
  s = applyEvent(s, { type: Action.WATCHING, payload: { run_id: "teacher1" } });
  s = applyEvent(s, { type: ServerEvent.RUN_PAUSED, payload: { run_id: "mine1", paused: true, reason: "paused by the teacher" } });
  assert.equal(s.mine.paused, "paused by the teacher");
  assert.equal(s.run.id, "teacher1");
  assert.equal(s.run.paused, undefined);
});

test("the teacher's Pause button: only over a running run, and it asks for the other state", () => {
  const run = { id: "r1", status: RunStatus.RUNNING };
  assert.deepEqual(pauseControl("teacher", run), { hidden: false, text: "Pause run", paused: true, runId: "r1" });
  assert.deepEqual(pauseControl("teacher", { ...run, paused: "paused by the teacher" }),
    { hidden: false, text: "Resume run", paused: false, runId: "r1" });
  assert.equal(pauseControl("student", run).hidden, true);  // a student has no such button
  assert.equal(pauseControl("teacher", { ...run, status: RunStatus.FINISHED }).hidden, true);
  assert.equal(pauseControl("teacher", null).hidden, true);
});
