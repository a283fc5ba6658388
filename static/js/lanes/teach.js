/**
 * The classroom's view state, next to the run: presenter mode (`present`), predict-then-reveal
 * (`reveal`), the zoom window (`zoom`, zoom.js) and a drag along the axis in progress (`drag`).
 * `applyTeach` folds one input action into the page's `ui` object (pure: it returns a new one, or the
 * same when nothing changed); `syncTeach` writes that state into the buttons and the body's data
 * attributes (CSS lays presenter mode out from `body[data-present]`).
 */
import { Input } from "../ui/controls.js";
import { timeAt } from "../canvas/layout.js";
import { rangeZoom, stepZoom } from "./zoom.js";

/**
 * `ui` after `action`; `at` = {clock, t (the playhead), layout (the one on screen), full (the axis span before any
 * zoom)}. Actions it does not know leave `ui` as it is.
 */
export function applyTeach(ui, action, { clock, t, layout, full }) {
  switch (action.type) {
    case Input.PRESENT: return { ...ui, present: action.on ?? !ui.present };
    case Input.REVEAL: {
      const reveal = action.on ?? !ui.reveal;
      return reveal === ui.reveal ? ui : { ...ui, reveal, zoom: null };
    }
    case Input.ZOOM: return layout ? { ...ui, zoom: stepZoom(ui.zoom, clock, action.delta, t, full) } : ui;
    case Input.ZOOM_RESET: return { ...ui, zoom: null, drag: null };
    case Input.DRAG: {
      const onAxis = layout && action.y0 < layout.axis.h;
      if (!action.done) return onAxis ? { ...ui, drag: { x0: action.x0, x1: action.x1 } } : ui;
      if (!onAxis || action.cancel) return ui.drag ? { ...ui, drag: null } : ui;
      const zoom = rangeZoom(clock, timeAt(layout, action.x0), timeAt(layout, action.x1), full);
      return { ...ui, drag: null, zoom: zoom || ui.zoom };
    }
    default: return ui;
  }
}

/**
 * Write the teaching state into the page: body[data-present|data-reveal], the Present button and the reveal switch,
 * the rows radios (the v key switches them),
 * the zoom buttons (`zoomed`: a window is shown; `hasRun`: there is something to zoom) and "jump to live" (`live`:
 * the run streams and the playhead is behind its newest step). Returns whether presenter mode just turned on.
 */
export function syncTeach(dom, ui, { zoomed, hasRun, live }) {
  const body = document.body;
  const present = String(Boolean(ui.present));
  const entered = body.dataset.present !== present && ui.present;
  if (body.dataset.present !== present) body.dataset.present = present;
  if (body.dataset.reveal !== String(Boolean(ui.reveal))) body.dataset.reveal = String(Boolean(ui.reveal));
  dom.btnPresent.setAttribute("aria-pressed", present);
  dom.btnPresent.title = ui.present ? "Leave presenter mode (p or Esc)" : "Presenter mode: the lanes fill the screen, larger type (p)";
  if (dom.reveal.checked !== Boolean(ui.reveal)) dom.reveal.checked = Boolean(ui.reveal);
  dom.btnZoomIn.disabled = !hasRun;
  dom.btnZoomOut.disabled = !zoomed;
  dom.btnZoomReset.disabled = !zoomed;
  dom.btnLive.hidden = !live;
  document.querySelectorAll('input[name="view"]').forEach((radio) => {  // the v key switches rows too
    if (radio.checked !== (radio.value === ui.view)) radio.checked = radio.value === ui.view;
  });
  return entered;
}
