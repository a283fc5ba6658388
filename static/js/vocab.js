/**
 * The wire vocabulary, defined once for the page: slot states, forward kinds, stop reasons, lanes and socket
 * event names. The strings are identical to the Python ones (engine/step.py, the protocol table in docs/protocol.md):
 * tests/pages/test_browser_vocab.py and tests/engine/report/test_metrics_table.py check them against the engine and catalog.js (the
 * engine's own declarations, generated). What a policy or an admission order *is* (its traits, label, options)
 * is read from catalog.js's POLICIES and ADMISSION_ORDERS, never from these names.
 */
import { POLICIES } from "./catalog.js";

/** What a slot of the batch did in one step (engine/step.py SlotState). */
export const SlotState = Object.freeze({
  PREFILL: "prefill",
  DECODE: "decode",
  PADDING: "padding",
  IDLE: "idle",
  PREEMPTED: "preempted",
  SWAPPED: "swapped",
});

/** Which forward calls a step made (engine/step.py Forward). */
export const Forward = Object.freeze({
  NONE: "none",        // nothing computed (the lane waited)
  PREFILL: "prefill",  // one call, prompt rows only
  DECODE: "decode",    // one call, one-token rows only
  SPLIT: "split",      // a prefill call, then a decode call
  FUSED: "fused",      // one call holding prefill and decode rows
});

/** Why a request stopped (engine/step.py StopReason). */
export const StopReason = Object.freeze({
  EOS: "eos",
  LENGTH: "length",
  STOP: "stop",            // a stop string appeared (live requests)
  CANCELLED: "cancelled",  // its client went away (live requests)
});

/** A request's phase in one step, for the request view: the slot states plus three of its own. */
export const Phase = Object.freeze({
  QUEUED: "queued",      // arrived, waiting for a slot
  PREFILL: SlotState.PREFILL,
  DECODE: SlotState.DECODE,
  PADDING: SlotState.PADDING,
  PREEMPTED: SlotState.PREEMPTED,
  SWAPPED: SlotState.SWAPPED,
  DONE: "done",          // its response went back to the client
  WAITING: "waiting",    // the whole lane computes nothing: it waits for arrivals (drawn over every row)
});

/**
 * Batching policies in the order the page stacks their lanes. No policy or admission order is named here: what
 * each is (its traits, label, options) comes from catalog.js's POLICIES and ADMISSION_ORDERS, the engine's own
 * declarations, so adding one is a change to the engine alone.
 */
export const LANE_ORDER = Object.freeze(Object.keys(POLICIES));

/** Socket events the server sends (docs/protocol.md, "Socket protocol"). */
export const ServerEvent = Object.freeze({
  MODEL_STATUS: "model_status",
  RUN_QUEUED: "run_queued",
  RUN_STARTED: "run_started",
  TICK: "tick",
  RUN_FINISHED: "run_finished",
  RUN_ERROR: "run_error",
  LIVE_SNAPSHOT: "live_snapshot",  // the live lane as a Live view joins: its recent steps and requests
  LIVE_STEP: "live_step",          // one step of the live lane, with the requests it touched (to the `live` room)
  CLASS_STATE: "class_state",      // a class as this page takes part in it (class.js)
  CLASS_CLOSED: "class_closed",    // the class ended: its teacher closed it, or stayed away past the grace
});

/** Socket events the page sends. */
export const ClientEvent = Object.freeze({
  SUBMIT: "submit",
  WATCH: "watch",
  CANCEL: "cancel",       // stop your own queued or running run (it ends with run_error code "cancelled")
  CLASS_OPEN: "class_open",    // open a class: this page is its teacher (class.js)
  CLASS_JOIN: "class_join",    // join a class by its code (with the teacher's token: as its teacher)
  CLASS_ALLOW: "class_allow",  // the teacher allows (or stops) students' own submits
  CLASS_CLOSE: "class_close",  // the teacher ends the class
  CLASS_SHOW: "class_show",    // the teacher's page shows a stored run (a reference run): its students watch it too
});

/** The socket event the Live view sends (app/web/events.py): join the `live` room, answered by live_snapshot. */
export const LiveClientEvent = Object.freeze({ WATCH_LIVE: "watch_live" });

/** Connection changes socket.js queues next to the server's events (page-only names). */
export const ConnectionEvent = Object.freeze({
  CONNECTED: "connected",
  DISCONNECTED: "disconnected",
});

/** A run's life on the page. */
export const RunStatus = Object.freeze({
  SUBMITTING: "submitting",
  QUEUED: "queued",
  RUNNING: "running",
  FINISHED: "finished",
  ERROR: "error",
  CANCELLED: "cancelled",  // you stopped it (to run another mix): not an error
});
