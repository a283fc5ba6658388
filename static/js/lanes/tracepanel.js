/**
 * The editor's trace panel: replay a slice of a production trace shipped with the server (Azure 2023 code
 * traffic, Mooncake chats with their prefix hash ids). It reads the panel into a `trace` spec (engine/workload/trace.py:
 * file, window "START:END" seconds, time and length scales, limit, seed) and hands it to `onTrace`; the requests
 * that come back from /api/generate fill the rows. Field names are the server's (`trace.window`), so a 400 lands
 * next to its field.
 */
import { el } from "../ui/dom.js";
import { checkInt, checkNumber, errorSlot, field, numberInput, select, textInput } from "./fields.js";

const DEFAULTS = Object.freeze({ window: "0:60", time_scale: 1, length_scale: 0.0625, seed: 0 });

/** "0:60" when it is START:END with 0 <= START < END; null otherwise. */
export function parseWindow(text) {
  const m = /^\s*(\d+(?:\.\d+)?)\s*:\s*(\d+(?:\.\d+)?)\s*$/.exec(String(text));
  return m && Number(m[1]) < Number(m[2]) ? `${Number(m[1])}:${Number(m[2])}` : null;
}

export function createTracePanel(container, { onTrace }) {
  let limits = { max_requests: 32, traces: [] };
  const f = {
    file: select([], ""),
    window: textInput(DEFAULTS.window, "0:60"),
    time_scale: numberInput(DEFAULTS.time_scale, 0.0001, 1000, "", "any"),
    length_scale: numberInput(DEFAULTS.length_scale, 0.0001, 1000, "", "any"),
    output_scale: numberInput("", 0.0001, 1000, "as lengths", "any"),
    limit: numberInput("", 1, limits.max_requests, "all"),
    seed: numberInput(DEFAULTS.seed, 0, 2 ** 31 - 1),
  };
  const button = el("button", { type: "button", className: "secondary", id: "replay-trace", text: "Replay" });
  container.append(
    el("div", { className: "generate-fields" }, [
      field("trace.file", "trace", f.file),
      field("trace.window", "window (s)", f.window),
      field("trace.time_scale", "time scale", f.time_scale),
      field("trace.length_scale", "length scale", f.length_scale),
      field("trace.output_scale", "output scale", f.output_scale),
      field("trace.limit", "at most", f.limit),
      field("trace.seed", "seed", f.seed),
      button]),
    el("span", { className: "note", text: "seconds from the slice's first request; time scale 0.5 arrives twice as fast, "
      + "burstiness kept; Mooncake: 512 x length scale tokens a hash block (a whole number from 32)" }),
    errorSlot("trace", "p"));

  /** The panel as a `trace` spec; problems go onto `errors`. */
  function read(errors) {
    const window = parseWindow(f.window.value);
    if (!window) errors.push({ field: "trace.window", message: "START:END in seconds, such as 0:60" });
    const spec = { file: f.file.value, window: window || f.window.value,
      time_scale: checkNumber(f.time_scale.value, "trace.time_scale", 0.0001, 1000, errors),
      length_scale: checkNumber(f.length_scale.value, "trace.length_scale", 0.0001, 1000, errors),
      seed: checkInt(f.seed.value, "trace.seed", 0, 2 ** 31 - 1, errors) };
    const out = checkNumber(f.output_scale.value, "trace.output_scale", 0.0001, 1000, errors, true);
    if (out !== undefined) spec.output_scale = out;
    const limit = checkInt(f.limit.value, "trace.limit", 1, limits.max_requests, errors, true);
    if (limit !== undefined) spec.limit = limit;
    return spec;
  }

  function setLimits(next) {
    limits = { ...limits, ...next };
    f.limit.max = String(limits.max_requests);
    const names = Array.isArray(limits.traces) ? limits.traces : [];
    f.file.replaceChildren(...names.map((n) => el("option", { value: n, text: n })));
  }

  button.addEventListener("click", () => onTrace());
  return { read, setLimits };
}
