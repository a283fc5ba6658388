/**
 * The compare page's input: its playback buttons, scrubber, speed, clock and row toggles, the canvas
 * (hover, click to seek) and the keyboard, as the same small actions the main page queues (controls.js
 * `Input`). Listeners only push onto the queue compare/main.js drains each frame; controls.js's
 * `syncControls` writes the playback state back. The main page's `bindControls` also wires its help
 * dialog and request panel, which this page has not, hence this binding of its own.
 */
import { Input } from "../ui/controls.js";

const TEXT_ENTRY = new Set(["INPUT", "TEXTAREA", "SELECT"]);

const KEYS = Object.freeze({
  " ": { type: Input.PLAY }, Spacebar: { type: Input.PLAY },
  ArrowRight: { type: Input.STEP, delta: 1 }, ArrowLeft: { type: Input.STEP, delta: -1 },
  Home: { type: Input.START }, End: { type: Input.END },
  "+": { type: Input.SPEED, delta: 1 }, "=": { type: Input.SPEED, delta: 1 },
  "-": { type: Input.SPEED, delta: -1 }, _: { type: Input.SPEED, delta: -1 },
});

export function bindCompareControls(dom, push) {
  const click = (node, action) => node.addEventListener("click", () => push(action));
  click(dom.btnStart, { type: Input.START });
  click(dom.btnBack, { type: Input.STEP, delta: -1 });
  click(dom.btnPlay, { type: Input.PLAY });
  click(dom.btnFwd, { type: Input.STEP, delta: 1 });
  click(dom.btnEnd, { type: Input.END });
  dom.scrub.addEventListener("input", () => push({ type: Input.SEEK, t: Number(dom.scrub.value) }));
  dom.scrub.addEventListener("pointerdown", () => { dom.scrub.dataset.dragging = "1"; });
  window.addEventListener("pointerup", () => { delete dom.scrub.dataset.dragging; });
  dom.speed.addEventListener("change", () => push({ type: Input.SET_SPEED, speed: Number(dom.speed.value) }));
  for (const [name, type] of [["clock", Input.CLOCK], ["view", Input.VIEW]]) {
    document.querySelectorAll(`input[name="${name}"]`).forEach((radio) =>
      radio.addEventListener("change", () => push({ type, [name]: radio.value })));
  }
  dom.canvas.addEventListener("mousemove", (e) => push({ type: Input.HOVER, x: e.offsetX, y: e.offsetY }));
  dom.canvas.addEventListener("mouseleave", () => push({ type: Input.HOVER, x: null, y: null }));
  dom.canvas.addEventListener("click", (e) => push({ type: Input.SEEK, x: e.offsetX }));
  new ResizeObserver(() => push({ type: Input.RESIZE })).observe(dom.wrap);
  window.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (TEXT_ENTRY.has(target.tagName) && !["radio", "checkbox", "range"].includes(target.type)) return;
    const action = KEYS[event.key];
    if (!action) return;
    event.preventDefault();  // Space must not also press the focused button or scroll the page
    push(action);
  });
}
