// The Live view's capture query: by count or by time window, gaps compressed on request (the server's
// app/live/capture.py reads these same parameters).
import assert from "node:assert/strict";
import { test } from "node:test";

import { captureNote, captureQuery, captureSeconds, captureUrl } from "../../../static/js/live/capture.js";

test("a count capture asks for the last N, as before", () => {
  assert.equal(captureUrl({ n: 16, by: "requests", seconds: 120, compress: false }, true), "/api/live/capture?last=16&download=1");
});

test("a window capture asks for window_s, and compression adds its two bounds", () => {
  assert.equal(captureQuery({ n: 16, by: "seconds", seconds: 300, compress: true }),
    "window_s=300&compress_over_s=3&compress_to_s=1");
});

test("the note says which requests and whether gaps are cut", () => {
  assert.match(captureNote({ n: 16, by: "seconds", seconds: 60, compress: true }, 5), /arrived in the last 60 s.*gap over 3 s cut to 1 s/);
  assert.match(captureNote({ n: 16, by: "requests", seconds: 60, compress: false }, 5), /last 5 finished requests.*unless you compress/);
});

test("seconds from the field's text: above 0, capped, else the default", () => {
  assert.equal(captureSeconds("90"), 90);
  assert.equal(captureSeconds("0"), 120);
  assert.equal(captureSeconds(""), 120);
  assert.equal(captureSeconds("1e9"), 86400);
});
