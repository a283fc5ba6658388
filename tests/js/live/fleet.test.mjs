// The fleet view's state (static/js/live/fleet_state.js): every replica's lane moved onto one clock (the wall clock),
// a replica that stops answering kept with its last steps and its reason, and the router's rows
// (static/js/live/fleet_panels.js). `node --test tests/js/`: no browser.
import assert from "node:assert/strict";
import { test } from "node:test";

import { applyFleetPoll, createFleetState, fleetNow } from "../../../static/js/live/fleet_state.js";
import { hitText, routerTables } from "../../../static/js/live/fleet_panels.js";

const record = (step, start) => ({ step, start_ms: start, ms: 50, slots: [], waiting: [], finished: [], returned: [] });
const replica = (index, startedAt, records, requests = []) => ({ index, url: `http://r${index}`, up: true, error: null,
  metrics: { prefix_cache_queries: 200, prefix_cache_hits: 50, requests: 3 },
  live: { ready: true, model: "simulator", slots: 4, options: null, now_ms: 1000, started_at: startedAt, records, requests } });
const poll = (at, replicas, router = { up: true, samples: [] }) => ({ at, replicas, router });

test("two replicas that opened 2.5 s apart share the wall clock: a lane's time t lands at started_at + t", () => {
  const s = applyFleetPoll(createFleetState(), poll(1000, [replica(0, 100, [record(1, 200)]),
    replica(1, 102.5, [record(1, 200)], [{ id: "L1", arrival_ms: 150, admitted_ms: 160, first_token_ms: null, finish_ms: null }])]), 5);
  assert.deepEqual(s.replicas.map((r) => r.records[0].start_ms), [100_200, 102_700]);
  assert.equal(s.replicas[1].requests[0].arrival_ms, 102_650);
  assert.equal(s.replicas[1].requests[0].first_token_ms, null);
  assert.equal(fleetNow(s, 505), 1_000_500);   // the poll's wall clock, extrapolated on the page's clock
});

test("a replica that stops answering keeps its last steps and says why; the clock never goes back", () => {
  let s = applyFleetPoll(createFleetState(), poll(1000, [replica(0, 100, [record(1, 200)]), replica(1, 100, [record(1, 300)])]), 0);
  s = applyFleetPoll(s, poll(999, [replica(0, 100, [record(2, 900)]),
    { index: 1, url: "http://r1", up: false, error: "connection refused", live: null, metrics: null }]), 2000);
  assert.equal(s.replicas[1].up, false);
  assert.equal(s.replicas[1].error, "connection refused");
  assert.deepEqual(s.replicas[1].records.map((r) => r.start_ms), [100_300]);
  assert.equal(s.replicas[0].records[0].start_ms, 100_900);
  assert.equal(fleetNow(s, 2000), 1_002_000);   // ahead of the late poll's 999 s
});

test("a poll that got no answer is said, and the replicas shown stay", () => {
  const s0 = applyFleetPoll(createFleetState(), poll(1000, [replica(0, 100, [record(1, 200)])]), 0);
  const s = applyFleetPoll(s0, { failed: "HTTP 502" }, 1000);
  assert.equal(s.failed, "HTTP 502");
  assert.equal(s.replicas, s0.replicas);
});

test("the router's samples labelled by worker get a column per worker, the replicas' first; the rest are rows", () => {
  const t = routerTables([
    { name: "vllm_router_policy_decisions_total", labels: { policy: "cache_aware", worker: "http://r1" }, value: 9 },
    { name: "vllm_router_worker_health", labels: { worker: "http://r0" }, value: 1 },
    { name: "vllm_router_worker_health", labels: { worker: "http://r1" }, value: 1 },
    { name: "vllm_router_requests_total", labels: { route: "/v1/completions" }, value: 8 },
    { name: "vllm_router_active_workers", labels: {}, value: 2 }], ["http://r0", "http://r1"]);
  assert.deepEqual(t.workers, ["http://r0", "http://r1"]);
  assert.deepEqual(t.perWorker.map((r) => [r.name, r.labels, r.values]), [
    ["policy_decisions_total", "policy=cache_aware", { "http://r1": 9 }],
    ["worker_health", "", { "http://r0": 1, "http://r1": 1 }]]);
  assert.deepEqual(t.rows.map((r) => [r.name, r.labels, r.value]),
    [["active_workers", "", 2], ["requests_total", "route=/v1/completions", 8]]);
  assert.equal(hitText({ prefix_cache_queries: 2680, prefix_cache_hits: 1234 }), "46% (1,234 of 2,680)");
  assert.equal(hitText({ prefix_cache_queries: 0, prefix_cache_hits: 0 }), "\u2013");
});
