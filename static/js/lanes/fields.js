/**
 * The editor's form pieces: a labelled input with its error slot, number inputs, and the checks that
 * turn a field's text into a value or an error named like the server's (`lanes[1].chunk_size`).
 * Every input carries `data-field` (its dotted name) and every error slot `data-error-for`, so an
 * error from the page or from the server's run_error lands next to the field it names.
 */
import { el } from "../ui/dom.js";

/** An error slot for `name` (a field, a row or a group). */
export function errorSlot(name, tag = "span") {
  return el(tag, { className: "field-error", dataset: { errorFor: name }, role: "alert" });
}

/** An input (or select) with its label and an error slot right after it. */
export function field(name, label, input) {
  input.dataset.field = name;
  input.setAttribute("aria-label", label);
  return el("label", { className: "field" }, [el("span", { className: "field-label", text: label }), input, errorSlot(name)]);
}

export function numberInput(value, min, max, placeholder = "", step = "1") {
  return el("input", { type: "number", min: String(min), max: String(max), step, placeholder,
    value: value === undefined || value === null ? "" : String(value) });
}

/** A text input. No `maxLength`: the browser would cut a longer paste without a word (a 4,500-character prompt
 * became 4,000); `checkText` refuses it by name instead, as the server does. */
export function textInput(value, placeholder = "") {
  return el("input", { type: "text", value: value ?? "", placeholder });
}

/** A text area for text whose line breaks matter (a prompt): an `<input>` would drop a preset's newlines, so an
 * edited-unchanged preset would run other tokens. As tall as its lines (1 to `maxRows`); no `maxLength` either. */
export function textArea(value, maxRows = 4) {
  const text = value ?? "";
  return el("textarea", { value: text, rows: Math.min(maxRows, Math.max(1, text.split("\n").length)), spellcheck: false });
}

export function select(values, value) {
  const node = el("select", {}, values.map(([v, text]) => el("option", { value: v, text })));
  node.value = value;
  return node;
}

/** A whole number from lo to hi; undefined for an empty optional field. Errors go onto `errors`. */
export function checkInt(raw, name, lo, hi, errors, optional = false) {
  if (raw === "" && optional) return undefined;
  const n = Number(raw);
  if (raw === "" || !Number.isInteger(n)) errors.push({ field: name, message: "a whole number, please" });
  else if (n < lo || n > hi) errors.push({ field: name, message: `from ${lo} to ${hi}` });
  return n;
}

/** A KV budget: empty (the default), or a whole number from one KV block (`blockSize` tokens, the server's
 * EngineConfig rule) to `hi`. */
export function checkKvBudget(raw, name, blockSize, hi, errors) {
  const n = checkInt(raw, name, 1, hi, errors, true);
  if (n !== undefined && Number.isInteger(n) && n >= 1 && n < blockSize) {
    errors.push({ field: name, message: `below one KV block (kv_block_size is ${blockSize} tokens): from ${blockSize} to ${hi}` });
  }
  return n;
}

/** Text of at most `maxChars` characters (the server's check_str rule and message); longer goes onto `errors`. */
export function checkText(raw, name, maxChars, errors) {
  if (raw.length > maxChars) errors.push({ field: name, message: `is ${raw.length} characters, the limit is ${maxChars}` });
  return raw;
}

/** A number (decimals allowed) from lo to hi; undefined for an empty optional field. */
export function checkNumber(raw, name, lo, hi, errors, optional = false) {
  if (raw === "" && optional) return undefined;
  const n = Number(raw);
  if (raw === "" || !Number.isFinite(n)) errors.push({ field: name, message: "a number, please" });
  else if (n < lo || n > hi) errors.push({ field: name, message: `from ${lo} to ${hi}` });
  return n;
}

/** A dotted name and the names enclosing it: "lanes[1].chunk_size", "lanes[1]", "lanes". */
function enclosing(name) {
  const names = [];
  let key = name || "";
  while (key) {
    names.push(key);
    const shorter = key.replace(/(\[\d+\]|\.[^.[\]]+)$/, "");
    key = shorter === key ? "" : shorter;
  }
  return names;
}

function find(root, attr, name) {
  return root.querySelector(`[${attr}="${CSS.escape(name)}"]`);
}

/**
 * Show `errors` ([{field, message}]) inside `root`: each next to the slot of its field, or of the nearest
 * enclosing name (`generate.output_tokens[1]` → `generate.output_tokens`), else in `general`.
 */
export function showFieldErrors(root, general, errors) {
  root.querySelectorAll(".field-error").forEach((node) => { node.textContent = ""; });
  root.querySelectorAll("[aria-invalid]").forEach((node) => node.removeAttribute("aria-invalid"));
  for (const { field: name, message } of errors) {
    const key = enclosing(name).find((k) => find(root, "data-error-for", k)) || "";
    const slot = key ? find(root, "data-error-for", key) : general;
    const input = key && find(root, "data-field", key);
    if (input) input.setAttribute("aria-invalid", "true");
    const text = name && message.startsWith(`${name}: `) ? message.slice(name.length + 2) : message;
    const shown = key === name || !name ? text : `${name}: ${text}`;
    slot.textContent = slot.textContent ? `${slot.textContent} ${shown}` : shown;
  }
}

/** Whether `root` has a field (or an error slot) of this name or of a name enclosing it. */
export function hasField(root, name) {
  return enclosing(name).some((k) => find(root, "data-field", k) || find(root, "data-error-for", k));
}
