/**
 * Playback controls and the keyboard: DOM listeners that only push small input actions onto the
 * queue main.js drains each frame (`{type: "play"}`, `{type: "step", delta: 1}` …), and `syncControls`,
 * which writes the playback state back into the buttons, scrubber and readout. A mouse click on the
 * canvas seeks, a drag along it zooms to that range; a tap asks for the tooltip of what it touched.
 * Keys: Space, ← →, Home End, + −, c (clock), v (rows), m (memory map), p (presenter mode), r (predict, then reveal),
 * [ ] (zoom out / in), ? (help), Escape (close what is open, then leave presenter mode).
 */

export const Input = Object.freeze({
  PLAY: "play", STEP: "step", START: "start", END: "end", SEEK: "seek", SPEED: "speed", SET_SPEED: "set-speed",
  CLOCK: "clock", VIEW: "view", HELP: "help", HOVER: "hover", RESIZE: "resize", REQUEST_LANE: "request-lane",
  TAP: "tap",  // a touch on the canvas: the tooltip of what is under it (on the time axis: seek there)
  PRESENT: "present", REVEAL: "reveal",   // toggles (or set, with `on`)
  ZOOM: "zoom", ZOOM_RESET: "zoom-reset", // zoom in (delta 1) or out (-1); show the whole run
  DRAG: "drag",                           // a mouse drag on the canvas from x0 to x1 (while dragging: `done` false)
  LIVE: "live",                           // jump to the newest step of a streaming run
  ESCAPE: "escape",
});

const TEXT_ENTRY = new Set(["INPUT", "TEXTAREA", "SELECT"]);
const DRAG_PX = 8;  // a mouse that moved less than this between down and up clicked

function keyAction(event) {
  switch (event.key) {
    case " ": case "Spacebar": return { type: Input.PLAY };
    case "ArrowRight": return { type: Input.STEP, delta: 1 };
    case "ArrowLeft": return { type: Input.STEP, delta: -1 };
    case "Home": return { type: Input.START };
    case "End": return { type: Input.END };
    case "+": case "=": return { type: Input.SPEED, delta: 1 };
    case "-": case "_": return { type: Input.SPEED, delta: -1 };
    case "c": case "C": return { type: Input.CLOCK, clock: null };  // the other clock
    case "v": case "V": return { type: Input.VIEW, view: null };    // the other row view
    case "m": case "M": return { type: "memory" };                  // the memory map (memmap-view.js MEMORY)
    case "p": case "P": return { type: Input.PRESENT };
    case "r": case "R": return { type: Input.REVEAL };
    case "]": return { type: Input.ZOOM, delta: 1 };
    case "[": return { type: Input.ZOOM, delta: -1 };
    case "?": return { type: Input.HELP };
    case "Escape": return { type: Input.ESCAPE };
    default: return null;
  }
}

/** The canvas: hover, a click that seeks, a drag that zooms, a tap that shows a tooltip. */
function bindCanvas(dom, push) {
  let pointer = "mouse";
  let down = null;     // {x, y} of a mouse press, while the button is down
  let dragged = false; // the press became a drag: its click must not also seek
  dom.canvas.addEventListener("mousemove", (e) => {
    push({ type: Input.HOVER, x: e.offsetX, y: e.offsetY });
    if (down && Math.abs(e.offsetX - down.x) >= DRAG_PX) push({ type: Input.DRAG, x0: down.x, y0: down.y, x1: e.offsetX, done: false });
  });
  dom.canvas.addEventListener("mouseleave", () => push({ type: Input.HOVER, x: null, y: null }));
  dom.canvas.addEventListener("pointerdown", (e) => {
    pointer = e.pointerType || "mouse";
    dragged = false;
    down = pointer === "mouse" && e.button === 0 ? { x: e.offsetX, y: e.offsetY } : null;
  });
  window.addEventListener("mouseup", (e) => {
    if (!down) return;
    const rect = dom.canvas.getBoundingClientRect();
    const x1 = e.clientX - rect.left;
    dragged = Math.abs(x1 - down.x) >= DRAG_PX;
    push({ type: Input.DRAG, x0: down.x, y0: down.y, x1, done: true, cancel: !dragged });
    down = null;
  });
  // A mouse click seeks; a tap (touch or pen) only shows what it touched, so reading a cell never moves the playhead.
  dom.canvas.addEventListener("click", (e) => {
    if (dragged) { dragged = false; return; }
    push(pointer === "mouse" ? { type: Input.SEEK, x: e.offsetX } : { type: Input.TAP, x: e.offsetX, y: e.offsetY });
  });
}

export function bindControls(dom, push) {
  const click = (node, action) => node && node.addEventListener("click", () => push(action));
  click(dom.btnStart, { type: Input.START });
  click(dom.btnBack, { type: Input.STEP, delta: -1 });
  click(dom.btnPlay, { type: Input.PLAY });
  click(dom.btnFwd, { type: Input.STEP, delta: 1 });
  click(dom.btnEnd, { type: Input.END });
  click(dom.btnHelp, { type: Input.HELP });
  click(dom.helpClose, { type: Input.HELP, close: true });
  click(dom.btnPresent, { type: Input.PRESENT });
  click(dom.btnZoomIn, { type: Input.ZOOM, delta: 1 });
  click(dom.btnZoomOut, { type: Input.ZOOM, delta: -1 });
  click(dom.btnZoomReset, { type: Input.ZOOM_RESET });
  click(dom.btnLive, { type: Input.LIVE });
  if (dom.reveal) dom.reveal.addEventListener("change", () => push({ type: Input.REVEAL, on: dom.reveal.checked }));
  dom.scrub.addEventListener("input", () => push({ type: Input.SEEK, t: Number(dom.scrub.value) }));
  dom.scrub.addEventListener("pointerdown", () => { dom.scrub.dataset.dragging = "1"; });
  window.addEventListener("pointerup", () => { delete dom.scrub.dataset.dragging; });
  dom.speed.addEventListener("change", () => push({ type: Input.SET_SPEED, speed: Number(dom.speed.value) }));
  dom.requestLane.addEventListener("change", () => push({ type: Input.REQUEST_LANE, lane: dom.requestLane.value }));
  document.querySelectorAll('input[name="clock"]').forEach((radio) =>
    radio.addEventListener("change", () => push({ type: Input.CLOCK, clock: radio.value })));
  document.querySelectorAll('input[name="view"]').forEach((radio) =>
    radio.addEventListener("change", () => push({ type: Input.VIEW, view: radio.value })));
  bindCanvas(dom, push);
  new ResizeObserver(() => push({ type: Input.RESIZE })).observe(dom.wrap);
  window.addEventListener("resize", () => push({ type: Input.RESIZE }));
  window.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (TEXT_ENTRY.has(target.tagName) && !["radio", "checkbox", "range"].includes(target.type)) return;
    if (event.key === " " && target.type === "checkbox") return;  // Space toggles a switch (predict, then reveal)
    const action = keyAction(event);
    if (!action) return;
    event.preventDefault();  // Space must not also press the focused button or scroll the page
    push(action);
  });
  window.addEventListener("keyup", (event) => {
    if (event.key === " " && !TEXT_ENTRY.has(event.target.tagName)) event.preventDefault();
  });
}

function fmtTime(clock, t) {
  return clock === "steps" ? `step ${Math.ceil(t - 1e-9)}` : `${(t / 1000).toFixed(2)} s`;
}

/**
 * Write the playback state into the controls (only what changed, so a drag on the scrubber is not fought).
 * `total`: the readout says how long the run is ("step 2 of 15"; predict-then-reveal keeps it back); `max`: the
 * scrubber's range (the run's end, or under predict-then-reveal the axis span, which says nothing of it).
 */
export function syncControls(dom, pb, limit, hasRun, { total = true, max = limit } = {}) {
  const playing = pb.playing ? "true" : "false";
  if (dom.btnPlay.dataset.playing !== playing) {
    dom.btnPlay.dataset.playing = playing;
    dom.btnPlay.setAttribute("aria-label", pb.playing ? "pause" : "play");
  }
  if (dom.scrub.max !== String(max)) dom.scrub.max = String(max);
  if (!dom.scrub.dataset.dragging && Number(dom.scrub.value) !== pb.t) dom.scrub.value = String(pb.t);
  const of = !total ? "" : pb.clock === "steps" ? ` of ${limit}` : ` of ${(limit / 1000).toFixed(2)} s`;
  const text = `${fmtTime(pb.clock, pb.t)}${of}`;
  if (dom.readout.textContent !== text) dom.readout.textContent = text;
  if (dom.speed.value !== String(pb.speed)) dom.speed.value = String(pb.speed);
  document.querySelectorAll('input[name="clock"]').forEach((radio) => {  // the page may switch clocks too
    if (radio.checked !== (radio.value === pb.clock)) radio.checked = radio.value === pb.clock;
  });
  for (const node of [dom.btnStart, dom.btnBack, dom.btnPlay, dom.btnFwd, dom.btnEnd, dom.scrub]) node.disabled = !hasRun;
}
