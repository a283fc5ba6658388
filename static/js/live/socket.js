/**
 * The Live view's socket: connects to the page's own origin (socket.js's options) and pushes every event the
 * page cares about onto a queue as `{type, payload, at}`, `at` being when it arrived on the page's clock
 * (performance.now()), which anchors the lane clock. It never touches the state, the canvas or the DOM;
 * live/main.js drains the queue once a frame. Sending is one thin wrapper: watch the live lane.
 */
import { socketOptions } from "../ui/socket.js";
import { ConnectionEvent, LiveClientEvent, ServerEvent } from "../core/vocab.js";

const LISTENED = [ServerEvent.MODEL_STATUS, ServerEvent.RUN_ERROR, ServerEvent.LIVE_SNAPSHOT, ServerEvent.LIVE_STEP];

export function connectLive(queue) {
  // window.io comes from /static/vendor/socket.io.min.js, loaded before the modules.
  const socket = window.io(socketOptions());
  const put = (type, payload) => queue.push({ type, payload, at: performance.now() });
  for (const name of LISTENED) socket.on(name, (payload) => put(name, payload));
  socket.on("connect", () => put(ConnectionEvent.CONNECTED, null));
  socket.on("disconnect", (reason) => put(ConnectionEvent.DISCONNECTED, { reason }));
  socket.on("connect_error", (err) => put(ConnectionEvent.DISCONNECTED, { reason: String(err && err.message || err) }));
  return {
    /** Watch the live lane (in scale-out: `worker`'s, or the first engine worker's when null). */
    watch(worker = null) { if (worker) socket.emit(LiveClientEvent.WATCH_LIVE, { worker }); else socket.emit(LiveClientEvent.WATCH_LIVE); },
  };
}
