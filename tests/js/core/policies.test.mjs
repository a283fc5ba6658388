// The page reads what a policy is from the catalog's traits, never from its name: policies.js, lane titles and the
// narration's group-or-slot wording. `node --test tests/js/`: no browser.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ADMISSION_ORDERS, POLICIES } from "../../../static/js/core/catalog.js";
import { laneTitle, orderLanes } from "../../../static/js/core/laneconfig.js";
import { narrate } from "../../../static/js/lanes/narration.js";
import { DEFAULT_ORDER, ORDERS, admitsGroups, isOrder, takes, traitsOf } from "../../../static/js/core/policies.js";
import { LANE_ORDER } from "../../../static/js/core/vocab.js";

test("every admission order the engine knows is offered and loads, sjf too", () => {
  assert.deepEqual(ORDERS.map((o) => o.name), ["fcfs", "priority", "sjf"]);
  assert.deepEqual(ORDERS.map((o) => o.name), ADMISSION_ORDERS.map((o) => o.name));
  assert.equal(DEFAULT_ORDER, "fcfs");
  assert.ok(isOrder("sjf") && isOrder("priority") && !isOrder("lifo"));
});

test("which options a lane may set comes from its policy's traits", () => {
  assert.ok(takes("dynamic", "max_wait") && takes("dynamic", "max_wait_ms") && !takes("continuous", "max_wait"));
  assert.ok(takes("continuous", "chunk_size") && takes("continuous", "prefix_cache") && !takes("static", "chunk_size"));
  assert.ok(takes("static", "kv_budget") && takes("static", "speculative"));  // options no policy claims: any lane's
  assert.ok(admitsGroups("static") && admitsGroups("dynamic") && !admitsGroups("continuous"));
  assert.ok(traitsOf("continuous").preempts && !traitsOf("static").preempts);
  assert.equal(traitsOf("swapping").admits, "slot");  // a policy a later engine added: no crash, no group wording
});

test("lanes stack and are titled by the catalog", () => {
  assert.deepEqual([...LANE_ORDER], Object.keys(POLICIES));
  assert.equal(laneTitle({ name: "dynamic", policy: "dynamic", options: {} }), POLICIES.dynamic.label);
  assert.deepEqual(orderLanes(["continuous", "static", "dynamic"], {}), ["static", "dynamic", "continuous"]);
});

function step(n, admitted, returned = [], running = ["A", "B"]) {
  const slot = (request) => ({ state: "decode", request, token_id: 1, token: "x" });
  return { step: n, slots: running.map(slot), admitted, returned, finished: [], waiting: [], preempted: [], forward: "decode",
    ms: 10, start_ms: 10 * (n - 1) };
}

test("the narration words a group lane and a slot lane from admits", () => {
  const records = [step(1, ["A", "B"]), step(2, [], ["A"]), step(3, ["C"], [], ["C", "B"])];
  const lane = (policy) => ({ name: policy, policy, records, step: 3, gap: null, arrivals: [] });
  assert.match(narrate([lane("static")], "steps", 3, false), /starts the next group: C/);
  assert.match(narrate([lane("continuous")], "steps", 3, false), /C takes the slot A freed/);
});
