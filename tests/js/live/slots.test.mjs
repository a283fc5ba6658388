// The Live page numbers its slots as the main page does, from 1 (issue 20: Live drew "slot 0" to "slot 7", the main
// page "slot 1" to "slot 8"). Draws static/js/live/renderer.js's canvas into a context that records its text.
// `node --test tests/js/`: no browser.
import assert from "node:assert/strict";
import { test } from "node:test";

import { drawLive, liveLayout } from "../../../static/js/live/renderer.js";
import { liveScene } from "../../../static/js/live/scene.js";

/** A 2D context that does nothing but note each fillText. */
function recordingContext(texts) {
  const target = { measureText: (s) => ({ width: String(s).length * 6 }), fillText: (s) => texts.push(String(s)) };
  return new Proxy(target, {
    get: (t, prop) => (prop in t ? t[prop] : () => {}),
    set: (t, prop, value) => { t[prop] = value; return true; },
  });
}

test("the live canvas labels its eight slot rows slot 1 to slot 8", () => {
  const texts = [];
  const layout = liveLayout(900, 8);
  drawLive(recordingContext(texts), liveScene([], [], 0, 30000, 8), layout);
  const slots = texts.filter((s) => /^slot \d+$/.test(s));
  assert.deepEqual(slots, ["slot 1", "slot 2", "slot 3", "slot 4", "slot 5", "slot 6", "slot 7", "slot 8"]);
});
