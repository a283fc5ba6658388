/**
 * The request-mix editor: slots, lanes, engine options and one row per request (prompt, tokens,
 * stop at EOS or a fixed length, arrival, priority). It reads and writes a workload object, checks
 * what it can before sending, and shows an error next to the field it names — the same dotted names
 * the server's run_error uses (`requests[2].max_new_tokens`). User text only ever goes into form
 * values and textContent.
 */
import { el } from "./dom.js";
import { LANE_ORDER, Lane, Policy, StopReason } from "./vocab.js";

const DEFAULT_LIMITS = { max_requests: 32, max_slots: 16, max_new_tokens: 256, max_prompt_chars: 4000,
  max_arrival: 500, max_id_chars: 32, max_wait: 100, max_kv_budget: 65536 };
const OPTIONS = ["chunk_size", "max_batch_tokens", "kv_budget", "max_wait"];
const KEPT = ["kv_block_size", "fused"];  // engine options without a field here: carried through unchanged

/** An input (or select) with its label and an error slot right after it. */
function field(name, label, input) {
  input.dataset.field = name;
  input.setAttribute("aria-label", label);
  const error = el("span", { className: "field-error", dataset: { errorFor: name }, role: "alert" });
  return el("label", { className: "field" }, [el("span", { className: "field-label", text: label }), input, error]);
}

function numberInput(value, min, max, placeholder = "") {
  return el("input", { type: "number", min: String(min), max: String(max), step: "1", placeholder,
    value: value === undefined || value === null ? "" : String(value) });
}

function checkInt(raw, name, lo, hi, errors, optional = false) {
  if (raw === "" && optional) return undefined;
  const n = Number(raw);
  if (raw === "" || !Number.isInteger(n)) errors.push({ field: name, message: "a whole number, please" });
  else if (n < lo || n > hi) errors.push({ field: name, message: `from ${lo} to ${hi}` });
  return n;
}

export function createEditor(root, { onChange, onRun }) {
  let limits = DEFAULT_LIMITS;
  let meta = { name: "custom", description: "" };
  let kept = {};
  const slots = numberInput(4, 1, limits.max_slots);
  const laneBoxes = LANE_ORDER.map((lane) => el("input", { type: "checkbox", value: lane }));
  const policy = el("select", {}, Object.values(Policy).map((p) => el("option", { value: p, text: p })));
  const options = Object.fromEntries(OPTIONS.map((k) => [k, numberInput("", 1, limits.max_kv_budget, "off")]));
  options.max_wait.placeholder = "15";
  const rows = el("tbody");
  const addButton = el("button", { type: "button", className: "secondary", text: "+ Add request" });
  const runButton = el("button", { type: "button", className: "primary", id: "run-mix", text: "Run this mix" });
  const general = el("p", { className: "field-error general", dataset: { errorFor: "" }, role: "alert" });

  const lanesBox = el("fieldset", { className: "field lanes" }, [el("legend", { text: "Lanes" }),
    ...laneBoxes.map((box) => el("label", { className: "check" }, [box, document.createTextNode(` ${box.value}`)])),
    el("span", { className: "field-error", dataset: { errorFor: "lanes" }, role: "alert" })]);
  root.append(
    el("div", { className: "editor-options" }, [field("slots", "Slots", slots), lanesBox,
      field("policy", "Policy", policy),
      field("chunk_size", "Chunk size", options.chunk_size),
      field("max_batch_tokens", "Max batch tokens", options.max_batch_tokens),
      field("kv_budget", "KV budget (tokens)", options.kv_budget),
      field("max_wait", "Dynamic max wait", options.max_wait)]),
    el("table", { className: "mix" }, [
      el("thead", {}, [el("tr", {}, ["id", "prompt", "tokens", "stop", "arrival", "priority", ""].map(
        (h) => el("th", { text: h, scope: "col" })))]),
      rows]),
    el("div", { className: "editor-actions" }, [addButton, runButton, general]));

  function addRow(q) {
    const i = rows.children.length;
    const stop = el("select", {}, [el("option", { value: StopReason.LENGTH, text: "fixed length" }),
      el("option", { value: StopReason.EOS, text: "at EOS" })]);
    stop.value = q.ignore_eos === false ? StopReason.EOS : StopReason.LENGTH;
    const remove = el("button", { type: "button", className: "remove", text: "\u00d7", title: "remove this request" });
    remove.setAttribute("aria-label", "remove this request");
    const cells = [
      field(`requests[${i}].id`, "id", el("input", { type: "text", value: q.id ?? `R${i + 1}`, maxLength: limits.max_id_chars })),
      field(`requests[${i}].prompt`, "prompt", el("input", { type: "text", value: q.prompt ?? "", maxLength: limits.max_prompt_chars })),
      field(`requests[${i}].max_new_tokens`, "tokens", numberInput(q.max_new_tokens ?? 4, 1, limits.max_new_tokens)),
      field(`requests[${i}].ignore_eos`, "stop", stop),
      field(`requests[${i}].arrival`, "arrival", numberInput(q.arrival ?? 0, 0, limits.max_arrival)),
      field(`requests[${i}].priority`, "priority", numberInput(q.priority ?? 0, -1000, 1000)),
      remove];
    rows.append(el("tr", {}, cells.map((c) => el("td", {}, [c]))));
  }

  function renumber() {  // keep data-field names in step with row positions after a removal
    [...rows.children].forEach((tr, i) => {
      tr.querySelectorAll("[data-field], [data-error-for]").forEach((node) => {
        const key = node.dataset.field !== undefined ? "field" : "errorFor";
        node.dataset[key] = node.dataset[key].replace(/^requests\[\d+\]/, `requests[${i}]`);
      });
    });
  }

  function read() {
    const errors = [];
    const workload = { name: meta.name, description: meta.description, ...kept };
    workload.slots = checkInt(slots.value, "slots", 1, limits.max_slots, errors);
    if (policy.value !== Policy.FCFS) workload.policy = policy.value;
    for (const [key, input] of Object.entries(options)) {
      const lo = key === "max_wait" ? 0 : 1;
      const hi = key === "max_wait" ? limits.max_wait : limits.max_kv_budget;
      const n = checkInt(input.value, key, lo, hi, errors, true);
      if (n !== undefined) workload[key] = n;
    }
    const ids = new Set();
    workload.requests = [...rows.children].map((tr, i) => {
      const get = (k) => tr.querySelector(`[data-field="requests[${i}].${k}"]`);
      const id = get("id").value;
      if (!id.trim()) errors.push({ field: `requests[${i}].id`, message: "give it an id" });
      else if (ids.has(id)) errors.push({ field: `requests[${i}].id`, message: "this id is taken" });
      ids.add(id);
      if (!get("prompt").value.trim()) errors.push({ field: `requests[${i}].prompt`, message: "write a prompt" });
      return { id, prompt: get("prompt").value,
        max_new_tokens: checkInt(get("max_new_tokens").value, `requests[${i}].max_new_tokens`, 1, limits.max_new_tokens, errors),
        ignore_eos: get("ignore_eos").value !== StopReason.EOS,
        arrival: checkInt(get("arrival").value, `requests[${i}].arrival`, 0, limits.max_arrival, errors),
        priority: checkInt(get("priority").value, `requests[${i}].priority`, -1000, 1000, errors) };
    });
    if (!workload.requests.length) errors.push({ field: "requests", message: "add at least one request" });
    const lanes = laneBoxes.filter((b) => b.checked).map((b) => b.value);
    if (!lanes.length) errors.push({ field: "lanes", message: "pick at least one lane" });
    return { workload, lanes, errors };
  }

  function showErrors(errors) {
    root.querySelectorAll(".field-error").forEach((node) => { node.textContent = ""; });
    root.querySelectorAll("[aria-invalid]").forEach((node) => node.removeAttribute("aria-invalid"));
    for (const { field: name, message } of errors) {
      const slot = name && root.querySelector(`[data-error-for="${CSS.escape(name)}"]`);
      const input = name && root.querySelector(`[data-field="${CSS.escape(name)}"]`);
      if (input) input.setAttribute("aria-invalid", "true");
      const text = name && message.startsWith(`${name}: `) ? message.slice(name.length + 2) : message;
      (slot || general).textContent = slot || !name ? text : `${name}: ${text}`;
    }
    const first = errors.length && root.querySelector("[aria-invalid]");
    if (first) first.focus();
  }

  function load(workload, lanes) {
    meta = { name: String(workload.name || "custom"), description: String(workload.description || "") };
    kept = Object.fromEntries(KEPT.filter((k) => workload[k] !== undefined).map((k) => [k, workload[k]]));
    slots.value = String(workload.slots ?? 4);
    policy.value = workload.policy === Policy.PRIORITY ? Policy.PRIORITY : Policy.FCFS;
    for (const [key, input] of Object.entries(options)) input.value = workload[key] ?? "";
    rows.replaceChildren();
    for (const q of workload.requests || []) addRow(q && typeof q === "object" ? q : {});
    const chosen = new Set(lanes && lanes.length ? lanes : [Lane.STATIC, Lane.CONTINUOUS]);
    laneBoxes.forEach((box) => { box.checked = chosen.has(box.value); });
    showErrors([]);
  }

  function setLimits(next) {
    limits = { ...DEFAULT_LIMITS, ...next };
    slots.max = String(limits.max_slots);
    addButton.disabled = rows.children.length >= limits.max_requests;
  }

  root.addEventListener("input", () => { meta = { name: "custom", description: "" }; onChange(); });
  addButton.addEventListener("click", () => {
    const n = rows.children.length;
    const prev = rows.lastElementChild ? read().workload.requests[n - 1] : {};
    addRow({ id: `R${n + 1}`, prompt: "Tell me a fact.", max_new_tokens: prev.max_new_tokens || 4, arrival: 0 });
    addButton.disabled = rows.children.length >= limits.max_requests;
    meta = { name: "custom", description: "" };
    onChange();
  });
  rows.addEventListener("click", (event) => {
    const button = event.target.closest("button.remove");
    if (!button) return;
    button.closest("tr").remove();
    renumber();
    addButton.disabled = rows.children.length >= limits.max_requests;
    meta = { name: "custom", description: "" };
    onChange();
  });
  runButton.addEventListener("click", () => onRun());
  /** Whether the editor has a field (or an error slot) of this name, e.g. "requests[2].prompt". */
  function has(name) {
    return Boolean(name && root.querySelector(`[data-field="${CSS.escape(name)}"], [data-error-for="${CSS.escape(name)}"]`));
  }

  return { load, read, showErrors, setLimits, has, get meta() { return meta; } };
}
