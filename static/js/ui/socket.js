/**
 * The socket: connects to the page's own origin and pushes every server event onto a queue, as
 * `{type, payload}`. It never touches the state or the canvas; main.js drains the queue once a
 * frame. Sending is three thin wrappers over the protocol's client events.
 */
import { ClientEvent, ConnectionEvent, ServerEvent } from "../core/vocab.js";

/**
 * Options of every page's socket. The page sends a client id this tab keeps (sessionStorage), so that its rate
 * limits follow it to whichever web process it reconnects to; without storage the server counts per socket.
 */
export function socketOptions() {
  let id = null;
  try {
    id = sessionStorage.getItem("batch-lanes-client");
    if (!id) {
      id = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
      sessionStorage.setItem("batch-lanes-client", id);
    }
  } catch (e) {
    id = null;
  }
  return { reconnectionDelayMax: 4000, auth: id ? { client: id } : {} };
}

export function connect(queue) {
  // window.io comes from /static/vendor/socket.io.min.js, loaded before the modules.
  const socket = window.io(socketOptions());
  for (const name of Object.values(ServerEvent)) {
    socket.on(name, (payload) => queue.push({ type: name, payload }));
  }
  socket.on("connect", () => queue.push({ type: ConnectionEvent.CONNECTED, payload: null }));
  socket.on("disconnect", (reason) => queue.push({ type: ConnectionEvent.DISCONNECTED, payload: { reason } }));
  socket.on("connect_error", (err) => queue.push({
    type: ConnectionEvent.DISCONNECTED, payload: { reason: String(err && err.message || err) },
  }));
  return {
    submit(workload, lanes) { socket.emit(ClientEvent.SUBMIT, { workload, lanes }); },
    watch(runId) { socket.emit(ClientEvent.WATCH, { run_id: runId }); },
    cancel(runId) { socket.emit(ClientEvent.CANCEL, { run_id: runId }); },
    /** A class event (ClientEvent.CLASS_*), for class.js. */
    send(name, payload) { socket.emit(name, payload); },
  };
}
