/**
 * The wire vocabulary, defined once for the page: slot states, forward kinds, stop reasons, lanes and socket
 * event names. The engine's enums (slot states, forward kinds, stop reasons) are catalog.js's, re-exported (the
 * engine's own declarations, generated); the rest are identical to the Python ones (the protocol table in
 * docs/protocol.md), which tests/pages/test_browser_vocab.py checks. What a policy or an admission order *is* (its traits,
 * label, options) is read from catalog.js's POLICIES and ADMISSION_ORDERS, never from these names.
 */
import { Forward, POLICIES, SlotState, StopReason } from "./catalog.js";

/**
 * The wire enums, as the engine declares them: catalog.js (generated from engine/step.py) writes them, this module
 * only re-exports them, so they are never written twice. SlotState: what a slot of the batch did in one step;
 * Forward: which forward calls a step made (none: the lane waited; prefill or decode: one call of those rows;
 * split: a prefill call, then a decode call; fused: one call holding both); StopReason: why a request stopped (eos,
 * length, stop: a stop string appeared, cancelled: its client went away).
 */
export { Forward, SlotState, StopReason };

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
  RUN_PAUSED: "run_paused",        // the class's teacher paused the run (or it went on): {run_id, paused, reason}
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
  CLASS_LOCK: "class_lock",    // the teacher locks (or unlocks) students' submits for a while
  CLASS_CANCEL: "class_cancel",  // the teacher stops a student run of the class, queued or executing
  CLASS_PAUSE: "class_pause",  // the teacher pauses (or resumes) the class's running run: its lanes wait
  CLASS_SHOW: "class_show",    // the teacher's page shows a stored run (a reference run): its students watch it too
  POLL_OPEN: "poll_open",      // the teacher asks the class a question before a run (lanes/poll.js)
  POLL_ANSWER: "poll_answer",  // a student answers it (again: the answer replaces theirs)
  POLL_CLOSE: "poll_close",    // the teacher closes the answers (the poll's run starting closes them too)
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
