/**
 * The sweep page's socket: connects to the page's own origin and pushes every event the page cares
 * about onto a queue as `{type, payload}`. It never touches the state, the charts or the DOM;
 * sweep/main.js drains the queue once a frame. Sending is three thin wrappers over the protocol.
 */
import { SweepClientEvent, SweepEvent } from "./state.js";
import { socketOptions } from "../ui/socket.js";
import { ConnectionEvent, ServerEvent } from "../core/vocab.js";

const LISTENED = [ServerEvent.MODEL_STATUS, ServerEvent.RUN_QUEUED, ServerEvent.RUN_STARTED, ServerEvent.RUN_ERROR,
  ...Object.values(SweepEvent)];

export function connectSweep(queue) {
  // window.io comes from /static/vendor/socket.io.min.js, loaded before the modules.
  const socket = window.io(socketOptions());
  for (const name of LISTENED) socket.on(name, (payload) => queue.push({ type: name, payload }));
  socket.on("connect", () => queue.push({ type: ConnectionEvent.CONNECTED, payload: null }));
  socket.on("disconnect", (reason) => queue.push({ type: ConnectionEvent.DISCONNECTED, payload: { reason } }));
  socket.on("connect_error", (err) => queue.push({
    type: ConnectionEvent.DISCONNECTED, payload: { reason: String(err && err.message || err) },
  }));
  return {
    sweep(payload) { socket.emit(SweepClientEvent.SWEEP, payload); },
    cancel(runId) { socket.emit(SweepClientEvent.CANCEL, { run_id: runId }); },
    watch(runId) { socket.emit(SweepClientEvent.WATCH, { run_id: runId }); },
  };
}
