// static/js/core/siblings.js without a browser: a request written with n samples is drawn as its siblings R3·1 ...
// R3·n, expanded by the engine (engine/workload/siblings.py's rule; run_started's `requests`, which the fixture
// tests/golden/siblings.json holds and tests/engine/workload/test_siblings.py checks against the engine), the tooltip
// of a sibling's cell says "sample 1 of 3 of R3", and the editor gets the request back as written.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { tooltipLines } from "../../../static/js/ui/panels.js";
import { collapseSiblings, sampleLine, siblingOf } from "../../../static/js/core/siblings.js";

const FIXTURE = JSON.parse(readFileSync(new URL("../../golden/siblings.json", import.meta.url), "utf8"));
const expanded = () => ({ ...FIXTURE.written, requests: FIXTURE.expanded });  // the page's run.workload

test("a request of n samples arrives as its siblings R3·1 ... R3·n, in place, the others as they are", () => {
  const ids = expanded().requests.map((q) => q.id);
  assert.deepEqual(ids, ["R1", "R3\u00b71", "R3\u00b72", "R3\u00b73", "R4"]);
  const second = expanded().requests[2];
  assert.deepEqual([second.group, second.sample, second.samples, second.prompt, second.n], ["R3", 2, 3, "b", undefined]);
  assert.deepEqual(expanded().requests.slice(1, 4).map((q) => q.seed), [5, 6, 7]);  // seed + i - 1
});

test("the labels: a sibling is 'sample i of n of R3', a request of its own has none", () => {
  const wl = expanded();
  assert.equal(sampleLine("R3\u00b71", wl), "sample 1 of 3 of R3");
  assert.equal(sampleLine("R3\u00b73", wl), "sample 3 of 3 of R3");
  assert.equal(sampleLine("R1", wl), null);
  assert.equal(sampleLine("R4", wl), null);
  assert.deepEqual(siblingOf("R3\u00b72", wl), { parent: "R3", sample: 2, samples: 3 });
});

test("the editor gets the requests back as written (n, seed), from the expanded run", () => {
  const back = collapseSiblings(expanded().requests);
  assert.deepEqual(back.map((q) => [q.id, q.n, q.seed]), [["R1", undefined, undefined], ["R3", 3, 5], ["R4", undefined, undefined]]);  // n 1 is no expansion: R4 as if written without it
});

test("a sibling's cell tooltip says which sample of which request it is", () => {
  const cell = { state: "decode", request: "R3\u00b72", token_id: 5, token: "Hi" };
  const record = { step: 2, slots: [cell], ms: 40, forward_ms: 38, forward: "decode" };
  const lane = { name: "lane", policy: "continuous", config: { name: "lane", policy: "continuous", options: {} },
    timeline: { arrivals: [], starts: [0, 40], ends: [40, 80] } };
  const hit = { kind: "cell", step: 2, what: { kind: "decode", request: "R3\u00b72", cell, record } };
  const lines = tooltipLines(lane, hit, "slots", expanded());
  assert.equal(lines[0], "R3\u00b72 \u00b7 slot 1 \u00b7 step 2");
  assert.equal(lines[1], "sample 2 of 3 of R3", lines.join("\n"));
  const alone = tooltipLines(lane, { ...hit, what: { ...hit.what, request: "R1" } }, "slots", expanded());
  assert.ok(!alone.some((l) => /sample/.test(l)), alone.join("\n"));
});
