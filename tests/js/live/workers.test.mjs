// A web process of a scale-out deployment shows one engine worker's live lane of several (issue 21): its snapshot
// names the worker and lists them all; the steps of the other workers' lanes (tagged `worker`) are left out, and
// picking another worker's snapshot replaces the lane shown. `node --test tests/js/`: no browser.
import assert from "node:assert/strict";
import { test } from "node:test";

import { applyLiveEvent, createLiveState } from "../../../static/js/live/state.js";
import { ServerEvent } from "../../../static/js/core/vocab.js";

const record = (step) => ({ step, start_ms: step * 100, ms: 60, slots: [], waiting: [], finished: [] });
const snapshot = (worker, records) => ({ type: ServerEvent.LIVE_SNAPSHOT, at: 0, payload: {
  ready: true, model: "simulator", slots: 8, traits: null, now_ms: 1000, started_at: 5, records, requests: [],
  worker, workers: [{ worker: "w-a", ready: true, running: 0, waiting: 0 }, { worker: "w-b", ready: true, running: 1, waiting: 0 }] } });
const step = (worker, n) => ({ type: ServerEvent.LIVE_STEP, at: 1, payload: { record: record(n), requests: [], worker } });

test("the live view keeps the steps of the worker it shows and drops the others'", () => {
  let s = applyLiveEvent(createLiveState(), snapshot("w-a", [record(1)]));
  assert.equal(s.lane.worker, "w-a");
  assert.deepEqual(s.lane.workers.map((w) => w.worker), ["w-a", "w-b"]);
  s = applyLiveEvent(s, step("w-b", 7));
  s = applyLiveEvent(s, step("w-a", 2));
  assert.deepEqual(s.records.map((r) => r.step), [1, 2]);
});

test("picking another worker replaces the lane shown with that worker's snapshot", () => {
  let s = applyLiveEvent(createLiveState(), snapshot("w-a", [record(1), record(2)]));
  s = applyLiveEvent(s, snapshot("w-b", [record(9)]));
  assert.equal(s.lane.worker, "w-b");
  assert.deepEqual(s.records.map((r) => r.step), [9]);
});

test("in one process (no worker named) every step is kept", () => {
  let s = applyLiveEvent(createLiveState(), snapshot(undefined, [record(1)]));
  s = applyLiveEvent(s, step(undefined, 2));
  assert.deepEqual(s.records.map((r) => r.step), [1, 2]);
});
