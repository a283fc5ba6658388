/**
 * The SLO's targets on the page: two fields under the metrics table, "TTFT ≤ … ms" and "TPOT ≤ … ms", that hold the
 * run to other targets than its preset's (the teacher's "what if the target were 300 ms?"), without running it again:
 * the table's goodput and met counts, the deadlines and the missed rings are computed again from the same step
 * records (core/slo.js). "Apply" queues {type: "slo", slo} for the loop, "the run's" queues {type: "slo", slo: null}
 * (the workload's own targets again). Fields are checked as the engine checks an `slo` (core/slo.js checkSlo); a bad
 * one is marked with the reason. It owns its DOM and reads nothing of the run but the targets `sync` hands it.
 */
import { el } from "../ui/dom.js";
import { checkSlo, sloWords } from "../core/slo.js";

export const SLO = "slo";  // the input the loop reads: {type: SLO, slo: {ttft_ms?, tpot_ms?} | null}

const FIELDS = [["ttft_ms", "TTFT"], ["tpot_ms", "TPOT"]];

export function createSloTargets(root, push) {
  const inputs = {};
  const fields = FIELDS.map(([key, name]) => {
    inputs[key] = el("input", { type: "number", min: "1", step: "any", inputMode: "decimal", name: key,
      className: "slo-target", ariaLabel: `${name} target in milliseconds`, placeholder: "none" });
    return el("label", { className: "inline" }, [`${name} \u2264`, inputs[key], "ms"]);
  });
  const apply = el("button", { type: "submit", text: "apply" });
  const reset = el("button", { type: "button", text: "the run's", title: "the targets the run's preset or mix set" });
  const note = el("span", { className: "note", id: "slo-note" });
  const error = el("span", { className: "field-error", role: "alert" });
  const form = el("form", { className: "slo-targets", ariaLabel: "SLO targets", noValidate: true },  // checkSlo checks
    [el("span", { className: "slo-title", text: "SLO:" }), ...fields, apply, reset, note, error]);
  root.replaceChildren(form);
  let shown = "";

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const raw = {};
    for (const [key] of FIELDS) if (inputs[key].value.trim() !== "") raw[key] = Number(inputs[key].value);
    const { slo, error: bad } = checkSlo(Object.keys(raw).length ? raw : null);
    for (const [key] of FIELDS) inputs[key].removeAttribute("aria-invalid");
    error.textContent = bad ? `${bad.field.replace("slo.", "")} ${bad.message}` : "";
    if (bad) {
      const input = inputs[bad.field.replace("slo.", "")] || inputs.ttft_ms;
      input.setAttribute("aria-invalid", "true");
      input.focus();
      return;
    }
    push({ type: SLO, slo });
  });
  reset.addEventListener("click", () => {
    error.textContent = "";
    shown = "";  // show the run's own values again, even where the fields still hold the teacher's
    push({ type: SLO, slo: null });
  });

  /** Show the targets in force: `own` (the run's workload's, or null) unless `override` (the teacher's) replaces them. */
  function sync(own, override) {
    const slo = override || own;
    const key = JSON.stringify([own, override]);
    if (key === shown) return;
    shown = key;
    if (!form.contains(document.activeElement)) {
      for (const [k] of FIELDS) inputs[k].value = slo && slo[k] !== undefined && slo[k] !== null ? String(slo[k]) : "";
    }
    reset.disabled = !override;
    note.textContent = override ? `your targets (the run's: ${own ? sloWords(own) : "none"})`
      : own ? "the run's targets" : "no SLO set: give a target to count goodput";
    root.dataset.slo = slo ? JSON.stringify(slo) : "";
  }
  return { sync };
}
