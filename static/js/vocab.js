/**
 * The wire vocabulary, defined once for the page: slot states, stop reasons, lanes and socket event
 * names. The strings are identical to the Python ones (engine/step.py, the protocol table in docs/protocol.md);
 * tests/test_browser_vocab.py checks that they stay so.
 */

/** What a slot of the batch did in one step (engine/step.py SlotState). */
export const SlotState = Object.freeze({
  PREFILL: "prefill",
  DECODE: "decode",
  PADDING: "padding",
  IDLE: "idle",
  PREEMPTED: "preempted",
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
  DONE: "done",          // its response went back to the client
  WAITING: "waiting",    // the whole lane computes nothing: it waits for arrivals (drawn over every row)
});

/** Batching policies, one lane each, in the order the page stacks them. */
export const Lane = Object.freeze({
  STATIC: "static",
  DYNAMIC: "dynamic",
  CONTINUOUS: "continuous",
});
export const LANE_ORDER = Object.freeze([Lane.STATIC, Lane.DYNAMIC, Lane.CONTINUOUS]);

/** Continuous-lane admission order (engine/config.py POLICIES). */
export const Policy = Object.freeze({ FCFS: "fcfs", PRIORITY: "priority" });

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
});

/** Socket events the page sends. */
export const ClientEvent = Object.freeze({
  SUBMIT: "submit",
  WATCH: "watch",
  CANCEL: "cancel",       // stop your own queued or running run (it ends with run_error code "cancelled")
});

/** The socket event the Live view sends (app/events.py): join the `live` room, answered by live_snapshot. */
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
