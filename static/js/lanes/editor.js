/**
 * The request-mix editor: the workload's defaults (slots and engine options every lane inherits),
 * the lanes (laneeditor.js), how arrivals count (steps or ms), an arrival process that generates
 * the requests (arrivalpanel.js), and one row per request (prompt, tokens, stop at EOS or a fixed
 * length, arrival, priority, samples n). It reads and writes a workload object, checks what it can before
 * sending, and shows an error next to the field it names — the same dotted names the server's
 * run_error uses (`requests[2].max_new_tokens`, `lanes[1].chunk_size`). User text only ever goes
 * into form values and textContent.
 */
import { createArrivalPanel } from "./arrivalpanel.js";
import { el } from "../ui/dom.js";
import { checkInt, checkKvBudget, checkNumber, checkText, errorSlot, field, hasField, numberInput, select, showFieldErrors, textArea, textInput } from "./fields.js";
import { createLaneList } from "./laneeditor.js";
import { createTracePanel } from "./tracepanel.js";
import { collapseSiblings } from "../core/siblings.js";
import { DEFAULT_ORDER, ORDERS, isOrder } from "../core/policies.js";
import { StopReason } from "../core/vocab.js";

const DEFAULT_LIMITS = { max_requests: 32, max_n: 8, max_slots: 16, max_new_tokens: 256, max_prompt_chars: 4000, max_lanes: 4,
  max_arrival: 500, max_arrival_ms: 600000, max_id_chars: 32, max_name_chars: 80, max_description_chars: 600, max_wait: 100, max_kv_budget: 65536,
  min_kv_budget: 16 };  // until /api/limits answers: the server's kv_block_size default
const OPTIONS = ["kv_budget", "chunk_size", "max_batch_tokens"];
// engine options without a field here, and the SLO (the metrics panel's targets: slotargets.js): carried through unchanged
const KEPT = ["kv_block_size", "fused", "prefix_cache", "speculative", "kv_allocation", "preemption", "slo"];

export function createEditor(root, { onChange, onRun, onGenerate }) {
  let limits = DEFAULT_LIMITS;
  let meta = { name: "custom", description: "" };
  let kept = {};
  let timed = false;  // arrivals in ms (arrival_ms) rather than steps (arrival)
  const slots = numberInput(4, 1, limits.max_slots);
  const scheduling = select(ORDERS.map((order) => [order.name, order.name]), DEFAULT_ORDER);
  const options = Object.fromEntries(OPTIONS.map((k) => [k, numberInput("", 1, limits.max_kv_budget, "off")]));
  const maxWait = numberInput("", 0, limits.max_wait, "15");
  const rows = el("tbody");
  const arrivalHead = el("th", { text: "arrival (step)", scope: "col" });
  const unit = Object.fromEntries(["steps", "ms"].map((u) => [u, el("input", { type: "radio", name: "arrival-unit", value: u, id: `arrival-unit-${u}` })]));
  const addButton = el("button", { type: "button", className: "secondary", text: "+ Add request" });
  const runButton = el("button", { type: "button", className: "primary", id: "run-mix", text: "Run this mix" });
  const general = el("p", { className: "field-error general", dataset: { errorFor: "" }, role: "alert" });
  const lanesBox = el("fieldset", { className: "group lanes" }, [el("legend", { text: "Lanes, side by side on one clock" })]);
  const arrivalsBox = el("fieldset", { className: "group arrivals" }, [el("legend", { text: "Arrivals" })]);
  const process = el("details", { className: "process", id: "arrival-process" }, [
    el("summary", { text: "Arrival process: generate the requests" })]);
  const traceBox = el("details", { className: "process", id: "trace-replay" }, [
    el("summary", { text: "Production trace: replay a slice of Azure's or Mooncake's traffic" })]);

  root.append(
    el("div", { className: "editor-options" }, [el("span", { className: "group-label", text: "Defaults for every lane" }),
      field("slots", "Slots", slots),
      field("kv_budget", "KV budget (tokens)", options.kv_budget),
      field("scheduling_policy", "Scheduling (continuous)", scheduling),
      field("chunk_size", "Chunk size (continuous)", options.chunk_size),
      field("max_batch_tokens", "Max batch tokens (continuous)", options.max_batch_tokens),
      field("max_wait", "Max wait steps (dynamic)", maxWait)]),
    lanesBox, arrivalsBox,
    el("table", { className: "mix" }, [
      el("thead", {}, [el("tr", {}, [el("th", { text: "id", scope: "col" }), el("th", { text: "prompt", scope: "col" }),
        el("th", { text: "tokens", scope: "col" }), el("th", { text: "stop", scope: "col" }), arrivalHead,
        el("th", { text: "priority", scope: "col" }), el("th", { text: "samples", scope: "col" }),
        el("th", { text: "", scope: "col" })])]),
      rows]),
    el("div", { className: "editor-actions" }, [addButton, runButton, errorSlot("requests"), general]));
  const lanes = createLaneList(lanesBox, { onChange: () => changed() });
  arrivalsBox.append(el("div", { className: "toggle", role: "radiogroup", ariaLabel: "arrivals count" }, [
    el("label", {}, [unit.steps, document.createTextNode(" in steps")]),
    el("label", {}, [unit.ms, document.createTextNode(" in milliseconds")])]),
  el("span", { className: "note", text: "steps: the first step a request may join, on every lane, counted from 1 as the lanes and the requests table count them; ms: when it arrives on each lane's clock" }),
  process, traceBox);
  const traces = createTracePanel(traceBox, { onTrace: () => {
    const errors = [];
    const spec = traces.read(errors);
    showErrors(errors);
    if (!errors.length) onGenerate({ trace: spec });
  } });
  const panel = createArrivalPanel(process, { onGenerate: () => {
    const errors = [];
    const spec = panel.read(errors);
    showErrors(errors);
    if (!errors.length) onGenerate(spec);
  } });

  function changed() {
    meta = { name: "custom", description: "" };
    onChange();
  }

  function addRow(q) {
    const i = rows.children.length;
    const stop = select([[StopReason.LENGTH, "fixed length"], [StopReason.EOS, "at EOS"]],
      q.ignore_eos === false ? StopReason.EOS : StopReason.LENGTH);
    const remove = el("button", { type: "button", className: "remove", text: "\u00d7", title: "remove this request" });
    remove.setAttribute("aria-label", "remove this request");
    const arrival = timed ? numberInput(q.arrival_ms ?? 0, 0, limits.max_arrival_ms, "", "any")
      : numberInput((q.arrival ?? 0) + 1, 1, limits.max_arrival + 1);  // steps as the page counts them: from 1
    arrival.dataset.key = "arrival";
    const cells = [
      field(`requests[${i}].id`, "id", textInput(q.id ?? `R${i + 1}`)),
      field(`requests[${i}].prompt`, "prompt", textArea(q.prompt ?? "")),  // its newlines kept
      field(`requests[${i}].max_new_tokens`, "tokens", numberInput(q.max_new_tokens ?? 4, 1, limits.max_new_tokens)),
      field(`requests[${i}].ignore_eos`, "stop", stop),
      field(`requests[${i}].${timed ? "arrival_ms" : "arrival"}`, timed ? "arrival ms" : "arrival step", arrival),
      field(`requests[${i}].priority`, "priority", numberInput(q.priority ?? 0, -1000, 1000)),
      field(`requests[${i}].n`, "samples", numberInput(q.n ?? 1, 1, limits.max_n)),  // n siblings R1·1 ...
      remove];
    // sampling without a field here (temperature, seed): carried through unchanged, as KEPT does for options
    const sampling = Object.fromEntries(["temperature", "seed"].filter((k) => q[k] !== undefined).map((k) => [k, q[k]]));
    rows.append(el("tr", { dataset: { sampling: JSON.stringify(sampling) } }, cells.map((c) => el("td", {}, [c]))));
  }

  function renumber() {  // keep data-field names in step with row positions after a removal
    [...rows.children].forEach((tr, i) => {
      tr.querySelectorAll("[data-field], [data-error-for]").forEach((node) => {
        const key = node.dataset.field !== undefined ? "field" : "errorFor";
        node.dataset[key] = node.dataset[key].replace(/^requests\[\d+\]/, `requests[${i}]`);
      });
    });
  }

  /** Arrivals count steps or ms: rename the arrival and max-wait fields (the numbers stay as typed). */
  function setTimed(next) {
    timed = next;
    unit.steps.checked = !timed;
    unit.ms.checked = timed;
    arrivalHead.textContent = timed ? "arrival (ms)" : "arrival (step)";
    const rename = (input, name, label) => {
      input.dataset.field = name;
      input.step = timed ? "any" : "1";
      input.setAttribute("aria-label", label);
      input.parentElement.querySelector(".field-error").dataset.errorFor = name;
    };
    [...rows.children].forEach((tr, i) => {
      const input = tr.querySelector('[data-key="arrival"]');
      rename(input, `requests[${i}].${timed ? "arrival_ms" : "arrival"}`, timed ? "arrival ms" : "arrival step");
      input.min = timed ? "0" : "1";  // steps count from 1 on the page
      if (!timed && Number(input.value) < 1) input.value = "1";
    });
    rename(maxWait, timed ? "max_wait_ms" : "max_wait", "max wait");
    maxWait.placeholder = timed ? "1000" : "15";
    maxWait.max = String(timed ? limits.max_arrival_ms : limits.max_wait);
    maxWait.closest("label").querySelector(".field-label").textContent = timed ? "Max wait ms (dynamic)" : "Max wait steps (dynamic)";
    lanes.setTimed(timed);
  }

  function readRequests(errors) {
    const ids = new Set();
    const requests = [...rows.children].map((tr, i) => {
      const get = (k) => tr.querySelector(`[data-field="requests[${i}].${k}"]`);
      const id = checkText(get("id").value, `requests[${i}].id`, limits.max_id_chars, errors);
      if (!id.trim()) errors.push({ field: `requests[${i}].id`, message: "give it an id" });
      else if (ids.has(id)) errors.push({ field: `requests[${i}].id`, message: "this id is taken" });
      ids.add(id);
      const prompt = checkText(get("prompt").value, `requests[${i}].prompt`, limits.max_prompt_chars, errors);
      if (!prompt.trim()) errors.push({ field: `requests[${i}].prompt`, message: "write a prompt" });
      const q = { id, prompt,
        max_new_tokens: checkInt(get("max_new_tokens").value, `requests[${i}].max_new_tokens`, 1, limits.max_new_tokens, errors),
        ignore_eos: get("ignore_eos").value !== StopReason.EOS };
      if (timed) q.arrival_ms = checkNumber(get("arrival_ms").value, `requests[${i}].arrival_ms`, 0, limits.max_arrival_ms, errors);
      else q.arrival = checkInt(get("arrival").value, `requests[${i}].arrival`, 1, limits.max_arrival + 1, errors) - 1;  // shown from 1
      q.priority = checkInt(get("priority").value, `requests[${i}].priority`, -1000, 1000, errors);
      const n = checkInt(get("n").value, `requests[${i}].n`, 1, limits.max_n, errors);
      if (n > 1) q.n = n;
      return { ...q, ...JSON.parse(tr.dataset.sampling || "{}") };
    });
    if (!requests.length) errors.push({ field: "requests", message: "add at least one request" });
    return requests;
  }

  /** {workload (its lanes inside), generate (the arrival-process panel, for the link), errors}. */
  function read() {
    const errors = [];
    const most = limits.max_description_chars;  // a longer lesson is clipped: the page shows the preset's own text
    const description = meta.description.length > most ? `${meta.description.slice(0, most - 1)}\u2026` : meta.description;
    const workload = { name: meta.name, description, ...kept };
    workload.slots = checkInt(slots.value, "slots", 1, limits.max_slots, errors);
    if (scheduling.value !== DEFAULT_ORDER) workload.scheduling_policy = scheduling.value;
    for (const [key, input] of Object.entries(options)) {
      const n = key === "kv_budget" ? checkKvBudget(input.value, key, blockSize(), limits.max_kv_budget, errors)
        : checkInt(input.value, key, 1, limits.max_kv_budget, errors, true);
      if (n !== undefined) workload[key] = n;
    }
    const wait = timed ? checkNumber(maxWait.value, "max_wait_ms", 0, limits.max_arrival_ms, errors, true)
      : checkInt(maxWait.value, "max_wait", 0, limits.max_wait, errors, true);
    if (wait !== undefined) workload[timed ? "max_wait_ms" : "max_wait"] = wait;
    workload.lanes = lanes.read(errors);
    workload.requests = readRequests(errors);
    return { workload, generate: panel.read([]), errors };
  }

  /** The smallest KV budget the server takes: one block (the mix's kv_block_size, else the server's default). */
  const blockSize = () => kept.kv_block_size ?? limits.min_kv_budget;

  function showErrors(errors) {
    showFieldErrors(root, general, errors);
    const first = errors.length && root.querySelector("[aria-invalid]");
    if (first) {
      const closed = first.closest("details:not([open])");
      if (closed) closed.open = true;
      first.focus();
    }
  }

  /** Show a workload (a preset, a link's mix, a replayed run) and, when it was generated, its arrival process. */
  function load(workload, generate = null) {
    meta = { name: String(workload.name || "custom"), description: String(workload.description || "") };
    kept = Object.fromEntries(KEPT.filter((k) => workload[k] !== undefined).map((k) => [k, workload[k]]));
    slots.value = String(workload.slots ?? 4);
    const order = workload.scheduling_policy ?? workload.policy;  // any order the engine knows (sjf too)
    scheduling.value = isOrder(order) ? order : DEFAULT_ORDER;
    for (const [key, input] of Object.entries(options)) input.value = workload[key] ?? "";
    const requests = collapseSiblings(workload.requests || []).map((q) => (q && typeof q === "object" ? q : {}));
    timed = requests.some((q) => q.arrival_ms !== undefined && q.arrival_ms !== null);
    maxWait.value = String(workload[timed ? "max_wait_ms" : "max_wait"] ?? "");
    lanes.load(workload.lanes, timed, kept.kv_block_size);
    rows.replaceChildren();
    requests.forEach(addRow);
    setTimed(timed);
    panel.load(generate);
    process.open = Boolean(generate);
    addButton.disabled = rows.children.length >= limits.max_requests;
    showErrors([]);
  }

  /** Requests drawn by /api/generate replace the rows (arrivals in ms), editable as any others. A trace's `made`
   * (name, description, Mooncake's kv_block_size) is kept with them. */
  function fillRequests(requests, made = null) {
    if (made) {
      kept = { ...kept, kv_block_size: made.kv_block_size };
      if (made.kv_block_size === undefined) delete kept.kv_block_size;
    }
    rows.replaceChildren();
    timed = true;
    requests.forEach(addRow);
    setTimed(true);
    addButton.disabled = rows.children.length >= limits.max_requests;
    showErrors([]);
    changed();
    if (made) meta = { name: String(made.name || "trace"), description: String(made.description || "") };
  }

  function setLimits(next) {
    limits = { ...DEFAULT_LIMITS, ...next };
    slots.max = String(limits.max_slots);
    options.kv_budget.min = String(limits.min_kv_budget);
    addButton.disabled = rows.children.length >= limits.max_requests;
    lanes.setLimits(limits);
    panel.setLimits(limits);
    traces.setLimits(limits);
  }

  root.addEventListener("input", (event) => { if (!event.target.closest(".process")) changed(); });
  for (const radio of Object.values(unit)) {
    radio.addEventListener("change", () => { setTimed(radio.value === "ms"); changed(); });
  }
  /** The lowest "R<n>" no row uses yet (after a removal, the gap it left). */
  function freeId() {
    const taken = new Set([...rows.children].map((tr, i) => tr.querySelector(`[data-field="requests[${i}].id"]`).value));
    let n = 1;
    while (taken.has(`R${n}`)) n += 1;
    return `R${n}`;
  }

  addButton.addEventListener("click", () => {
    const n = rows.children.length;
    const prev = rows.lastElementChild ? readRequests([])[n - 1] : {};
    addRow({ id: freeId(), prompt: "Tell me a fact.", max_new_tokens: prev.max_new_tokens || 4 });
    addButton.disabled = rows.children.length >= limits.max_requests;
    changed();
  });
  rows.addEventListener("click", (event) => {
    const button = event.target.closest("button.remove");
    if (!button) return;
    button.closest("tr").remove();
    renumber();
    addButton.disabled = rows.children.length >= limits.max_requests;
    changed();
  });
  runButton.addEventListener("click", () => onRun());

  return { load, read, showErrors, setLimits, fillRequests, setVllm: (on, problem) => lanes.setVllm(on, problem),
    /** Whether the editor has a field (or an error slot) of this name, e.g. "requests[2].prompt". */
    has: (name) => hasField(root, name),
    get meta() { return meta; } };
}
