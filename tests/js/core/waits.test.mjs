// Why a request waits, in the page's words (static/js/core/waits.js): the narration ("R7 waits: 3 KV blocks short"), the
// requests view's tooltip over a queued cell, and the words of every reason. `node --test tests/js/`: no browser.
import assert from "node:assert/strict";
import { test } from "node:test";

import { define } from "../../../static/js/core/glossary.js";
import { narrate } from "../../../static/js/lanes/narration.js";
import { tooltipLines, waitLine } from "../../../static/js/ui/panels.js";
import { WaitReason, headWait, waitTerm, waitText } from "../../../static/js/core/waits.js";

const workload = { requests: [{ id: "R1", prompt: "p", max_new_tokens: 8, priority: 0 },
  { id: "R7", prompt: "p", max_new_tokens: 4, priority: 0 }, { id: "VIP", prompt: "p", max_new_tokens: 4, priority: 9 }] };

function record(n, waits, slots = [{ state: "decode", request: "R1", token_id: 1, token: "x" }, { state: "idle", request: null }]) {
  return { step: n, slots, admitted: [], returned: [], finished: [], waiting: Object.keys(waits), preempted: [],
    forward: slots.some((c) => c.request) ? "decode" : "none", ms: 10, forward_ms: 9, start_ms: 10 * (n - 1), waits };
}

const lane = (records, policy = "continuous") => ({ name: "lane", policy, records, step: records.length, gap: null,
  arrivals: [], workload });

test("every reason says what it waits for, with its number", () => {
  assert.equal(waitText({ reason: WaitReason.KV_BLOCKS, short: 3 }), "3 KV blocks short");
  assert.equal(waitText({ reason: WaitReason.KV_BLOCKS, short: 1 }), "1 KV block short");
  assert.equal(waitText({ reason: WaitReason.NO_SLOT }), "no free slot");
  assert.equal(waitText({ reason: WaitReason.TOKEN_BUDGET }), "the step's token budget is spent");
  assert.equal(waitText({ reason: WaitReason.GROUP_NOT_FULL, missing: 2 }), "its group lacks 2 members");
  assert.equal(waitText({ reason: WaitReason.GROUP_RUNNING }), "the running group holds the slots");
  assert.equal(waitText({ reason: WaitReason.DEADLINE, left: 1 }), "a fuller group, or 1 step more");
  assert.equal(waitText({ reason: WaitReason.DEADLINE, left: 120.4 }, { timed: true }), "a fuller group, or 120 ms more");
  assert.equal(waitText({ reason: WaitReason.SWAPPED, short: 2 }), "swapped out, 2 KV blocks short to swap back in");
  assert.equal(waitText({ reason: WaitReason.SIBLING, ahead: "R3" }), "waits for R3's prompt, which its samples share");
  const specs = Object.fromEntries(workload.requests.map((q) => [q.id, q]));
  assert.equal(waitText({ reason: WaitReason.BEHIND, ahead: "VIP" }, { specs, id: "R7" }),
    "behind VIP (a higher priority), which waits for KV blocks");
  assert.equal(waitText({ reason: WaitReason.BEHIND, ahead: "R1" }, { specs, id: "R7" }),
    "behind R1 (first in line), which waits for KV blocks");
  for (const reason of Object.values(WaitReason)) {  // each has its glossary entry
    assert.ok(define(waitTerm({ reason })), reason);
  }
});

test("the narration says who waits and why: a KV shortfall before the obvious facts", () => {
  const r = record(2, { R7: { reason: WaitReason.KV_BLOCKS, short: 3 } });
  assert.match(narrate([lane([record(1, {}), r])], "steps", 2, false), /lane: 1 slot idle; R7 waits: 3 KV blocks short/);
  const behind = record(2, { VIP: { reason: WaitReason.KV_BLOCKS, short: 2 }, R7: { reason: WaitReason.BEHIND, ahead: "VIP" } });
  assert.match(narrate([lane([record(1, {}), behind])], "steps", 2, false), /VIP waits: 2 KV blocks short/);
});

test("several requests that wait for the same reason are named together", () => {
  const full = [{ state: "decode", request: "R1", token_id: 1, token: "x" }];
  const r = record(1, { R7: { reason: WaitReason.NO_SLOT }, VIP: { reason: WaitReason.NO_SLOT } }, full);
  assert.deepEqual(headWait(r), { ids: ["R7", "VIP"], text: "no free slot", reason: WaitReason.NO_SLOT });
  const idle = record(1, { R7: { reason: WaitReason.GROUP_RUNNING } });  // the obvious reason: the terse old words
  assert.match(narrate([lane([idle], "static")], "steps", 1, false), /1 slot idle while R7 wait/);
});

test("a step that computed nothing says what its waiters wait for", () => {
  const none = record(1, { R7: { reason: WaitReason.DEADLINE, left: 2 } }, [{ state: "idle", request: null }]);
  assert.match(narrate([lane([none], "dynamic")], "steps", 1, false),
    /computes nothing: R7 waits: a fuller group, or 2 steps more/);
  const old = { ...none, waits: undefined };  // a stored run from before wait reasons
  assert.match(narrate([lane([old], "dynamic")], "steps", 1, false), /computes nothing: R7 waits for a fuller batch/);
});

test("the requests view's tooltip over a queued cell says why it waits", () => {
  const rec = record(3, { R7: { reason: WaitReason.KV_BLOCKS, short: 3 } });
  const tlane = { name: "lane", policy: "continuous", config: { options: {} }, timeline: { arrivals: [], starts: [0, 10, 20], ends: [10, 20, 30] } };
  const lines = tooltipLines(tlane, { kind: "cell", step: 3, what: { kind: "queued", request: "R7", cell: null, record: rec, slot: null } },
    "requests", workload);
  assert.ok(lines.includes("waits: 3 KV blocks short"), lines.join("\n"));
  assert.equal(waitLine(rec, "R1", workload), "");  // R1 runs: it does not wait
});
