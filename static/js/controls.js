/**
 * Playback controls and the keyboard: DOM listeners that only push small input actions onto the
 * queue main.js drains each frame (`{type: "play"}`, `{type: "step", delta: 1}` …), and `syncControls`,
 * which writes the playback state back into the buttons, scrubber and readout. A mouse click on the
 * canvas seeks; a tap asks for the tooltip of what it touched.
 */

export const Input = Object.freeze({
  PLAY: "play", STEP: "step", START: "start", END: "end", SEEK: "seek", SPEED: "speed", SET_SPEED: "set-speed",
  CLOCK: "clock", VIEW: "view", HELP: "help", HOVER: "hover", RESIZE: "resize", REQUEST_LANE: "request-lane",
  TAP: "tap",  // a touch on the canvas: the tooltip of what is under it (on the time axis: seek there)
});

const TEXT_ENTRY = new Set(["INPUT", "TEXTAREA", "SELECT"]);

function keyAction(event) {
  switch (event.key) {
    case " ": case "Spacebar": return { type: Input.PLAY };
    case "ArrowRight": return { type: Input.STEP, delta: 1 };
    case "ArrowLeft": return { type: Input.STEP, delta: -1 };
    case "Home": return { type: Input.START };
    case "End": return { type: Input.END };
    case "+": case "=": return { type: Input.SPEED, delta: 1 };
    case "-": case "_": return { type: Input.SPEED, delta: -1 };
    case "?": return { type: Input.HELP };
    case "Escape": return { type: Input.HELP, close: true };
    default: return null;
  }
}

export function bindControls(dom, push) {
  const click = (node, action) => node.addEventListener("click", () => push(action));
  click(dom.btnStart, { type: Input.START });
  click(dom.btnBack, { type: Input.STEP, delta: -1 });
  click(dom.btnPlay, { type: Input.PLAY });
  click(dom.btnFwd, { type: Input.STEP, delta: 1 });
  click(dom.btnEnd, { type: Input.END });
  click(dom.btnHelp, { type: Input.HELP });
  click(dom.helpClose, { type: Input.HELP, close: true });
  dom.scrub.addEventListener("input", () => push({ type: Input.SEEK, t: Number(dom.scrub.value) }));
  dom.scrub.addEventListener("pointerdown", () => { dom.scrub.dataset.dragging = "1"; });
  window.addEventListener("pointerup", () => { delete dom.scrub.dataset.dragging; });
  dom.speed.addEventListener("change", () => push({ type: Input.SET_SPEED, speed: Number(dom.speed.value) }));
  dom.requestLane.addEventListener("change", () => push({ type: Input.REQUEST_LANE, lane: dom.requestLane.value }));
  document.querySelectorAll('input[name="clock"]').forEach((radio) =>
    radio.addEventListener("change", () => push({ type: Input.CLOCK, clock: radio.value })));
  document.querySelectorAll('input[name="view"]').forEach((radio) =>
    radio.addEventListener("change", () => push({ type: Input.VIEW, view: radio.value })));
  dom.canvas.addEventListener("mousemove", (e) => push({ type: Input.HOVER, x: e.offsetX, y: e.offsetY }));
  dom.canvas.addEventListener("mouseleave", () => push({ type: Input.HOVER, x: null, y: null }));
  // A mouse click seeks; a tap (touch or pen) only shows what it touched, so reading a cell never moves the playhead.
  let pointer = "mouse";
  dom.canvas.addEventListener("pointerdown", (e) => { pointer = e.pointerType || "mouse"; });
  dom.canvas.addEventListener("click", (e) => push(pointer === "mouse" ? { type: Input.SEEK, x: e.offsetX }
    : { type: Input.TAP, x: e.offsetX, y: e.offsetY }));
  new ResizeObserver(() => push({ type: Input.RESIZE })).observe(dom.wrap);
  window.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (TEXT_ENTRY.has(target.tagName) && !["radio", "checkbox", "range"].includes(target.type)) return;
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

/** Write the playback state into the controls (only what changed, so a drag on the scrubber is not fought). */
export function syncControls(dom, pb, limit, hasRun) {
  const playing = pb.playing ? "true" : "false";
  if (dom.btnPlay.dataset.playing !== playing) {
    dom.btnPlay.dataset.playing = playing;
    dom.btnPlay.setAttribute("aria-label", pb.playing ? "pause" : "play");
  }
  const max = String(limit);
  if (dom.scrub.max !== max) dom.scrub.max = max;
  if (!dom.scrub.dataset.dragging && Number(dom.scrub.value) !== pb.t) dom.scrub.value = String(pb.t);
  const total = pb.clock === "steps" ? `of ${limit}` : `of ${(limit / 1000).toFixed(2)} s`;
  const text = `${fmtTime(pb.clock, pb.t)} ${total}`;
  if (dom.readout.textContent !== text) dom.readout.textContent = text;
  if (dom.speed.value !== String(pb.speed)) dom.speed.value = String(pb.speed);
  document.querySelectorAll('input[name="clock"]').forEach((radio) => {  // the page may switch clocks too
    if (radio.checked !== (radio.value === pb.clock)) radio.checked = radio.value === pb.clock;
  });
  for (const node of [dom.btnStart, dom.btnBack, dom.btnPlay, dom.btnFwd, dom.btnEnd, dom.scrub]) node.disabled = !hasRun;
}
