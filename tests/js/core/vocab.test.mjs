// static/js/core/vocab.js takes the engine's enums from the generated catalog (static/js/core/catalog.js) and writes
// none of them again: each of the catalog's enums (its CamelCase exports) is vocab.js's, the very same frozen object.
import assert from "node:assert/strict";
import { test } from "node:test";

import * as catalog from "../../../static/js/core/catalog.js";
import * as vocab from "../../../static/js/core/vocab.js";

const ENUMS = Object.keys(catalog).filter((name) => /^[A-Z][a-z]/.test(name));

test("vocab.js re-exports every enum of the catalog, the same object", () => {
  for (const name of ["Forward", "SlotState", "StopReason"]) assert.ok(ENUMS.includes(name), name);
  for (const name of ENUMS) {
    assert.equal(vocab[name], catalog[name], name);
    assert.ok(Object.isFrozen(vocab[name]), name);
  }
});

test("a request's phases name the slot states by the catalog's strings", () => {
  for (const key of ["PREFILL", "DECODE", "PADDING", "PREEMPTED", "SWAPPED"]) {
    assert.equal(vocab.Phase[key], catalog.SlotState[key], key);
  }
});
