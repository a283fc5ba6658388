/**
 * The sweep form: which mix (a preset, the mix from the main page's link, or the sweep being shown),
 * the request rates, requests per rate, burstiness, the backend (the model, or the simulator), the SLOs for goodput
 * and the lanes. `read()` turns
 * it into one `sweep` payload (never a workload with both `requests` and `generate`) plus the errors
 * it can see itself; `showErrors` puts each error next to its field. It knows the payload's shape,
 * not the socket or the state; the server checks everything again.
 */
import { DEFAULT_LANES } from "../core/catalog.js";
import { el } from "../ui/dom.js";

const DEFAULT_PRESET = "poisson";
const PLAIN_FIELDS = ["workload", "rates", "generate.n", "burstiness", "slo_ttft_ms", "slo_tpot_ms", "lanes", "backend"];

export const laneName = (config) => (typeof config === "string" ? config : String(config && config.name));

/** A lane's label: its name, and for a configuration its policy and options. */
function laneLabel(config) {
  if (typeof config === "string") return config;
  const { name, policy, ...options } = config;
  const extra = Object.entries(options).map(([k, v]) => `${k} ${v}`);
  return `${name} (${[policy, ...extra].filter(Boolean).join(", ")})`;
}

/** The form key a server field belongs to ("rates[2]" -> "rates", "lanes[1]" -> "lanes"), or null: a general error. */
export function formKey(field) {
  if (!field) return null;
  if (/^rates(\[\d+\])?$/.test(field)) return "rates";
  if (/^lanes(\[\d+\].*)?$/.test(field)) return "lanes";
  if (field === "generate.burstiness") return "burstiness";
  return PLAIN_FIELDS.includes(field) ? field : null;
}

function number(input, field, errors, { integer = false } = {}) {
  const text = input.value.trim();
  if (text === "") return null;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    errors.push({ field, message: `${field}: must be ${integer ? "a whole number" : "a number"} above 0` });
    return null;
  }
  return value;
}

export function createSweepForm(dom) {
  let sources = [];       // [{key, label, workload, lanes, description}]
  let shown = null;       // the source whose lanes the checkboxes show

  const current = () => sources.find((s) => s.key === dom.source.value) || null;
  const generated = (src) => Boolean(src && src.workload.generate && typeof src.workload.generate === "object");
  const traced = (src) => Boolean(src && src.workload.trace && typeof src.workload.trace === "object");  // a trace slice

  function renderSources(selected) {
    dom.source.replaceChildren(...sources.map((s) => new Option(s.label, s.key)));
    if (sources.some((s) => s.key === selected)) dom.source.value = selected;
    showSource();
  }

  /** Lane checkboxes, n, burstiness and the note for the chosen source (once per change of source). */
  function showSource() {
    const src = current();
    if (src === shown) return;
    shown = src;
    const lanes = src ? src.lanes : [];
    dom.laneChecks.replaceChildren(...lanes.map((config, i) => el("label", { className: "check" }, [
      el("input", { type: "checkbox", checked: true, dataset: { lane: String(i) } }), ` ${laneLabel(config)}`])));
    const gen = generated(src) ? src.workload.generate : null;
    const requests = src && Array.isArray(src.workload.requests) ? src.workload.requests.length : 0;
    dom.n.disabled = !gen;
    dom.n.value = String(gen ? gen.n ?? 16 : requests);
    dom.n.title = gen ? "how many requests the generator draws at each rate" : "this mix's own requests, re-timed at each rate";
    if (gen && gen.burstiness !== undefined) dom.burstiness.value = String(gen.burstiness);
    const how = gen ? "The sweep draws the mix again at each rate: same seed, so the same prompts and lengths, new arrival times."
      : `The sweep keeps this mix's ${requests} requests (prompts and lengths) and draws new arrival times at each rate.`;
    dom.burstiness.disabled = traced(src);  // a trace keeps its own burstiness
    dom.sourceNote.textContent = !src ? "" : traced(src) ? "The sweep replays this trace slice at each rate: its "
      + "arrival gaps compressed or stretched to the rate, its burstiness and requests kept." : how;
    dom.sourceNote.title = src ? src.description : "";
  }

  /** The presets (GET /api/presets) and the mix from the main page's link, if any (`decodeHash`'s result). */
  function setSources(presets, fromHash) {
    sources = sources.filter((s) => s.key === "sweep");
    if (fromHash && fromHash.mix) {
      const { workload, lanes } = fromHash.mix;
      sources.push({ key: "hash", label: `the mix from the main page (${workload.name || "custom"})`, workload,
        lanes: lanes || workload.lanes || [...DEFAULT_LANES], description: workload.description || "" });
    }
    for (const p of presets) {
      sources.push({ key: `preset:${p.name}`, label: `${p.name}${p.generate ? " (generated)" : ""}`, workload: p,
        lanes: p.lanes || [...DEFAULT_LANES], description: p.description || "" });
    }
    const wanted = sources.some((s) => s.key === "sweep") ? "sweep" : fromHash && fromHash.mix ? "hash"
      : `preset:${(fromHash && fromHash.preset) || DEFAULT_PRESET}`;
    renderSources(sources.some((s) => s.key === wanted) ? wanted : (sources[0] || {}).key);
  }

  /** Show what a sweep being watched ran (its sweep_started), as the form's values. */
  function loadSweep(sweep) {
    if (!sweep.workload) return;
    sources = [{ key: "sweep", label: `this sweep's mix (${sweep.workload.name || "custom"})`, workload: sweep.workload,
      lanes: sweep.laneConfigs.length ? sweep.laneConfigs : sweep.lanes, description: sweep.workload.description || "" },
    ...sources.filter((s) => s.key !== "sweep")];
    shown = null;
    renderSources("sweep");
    dom.rates.value = sweep.rates.join(", ");
    dom.sloTtft.value = sweep.slo.ttft_ms === null ? "" : String(sweep.slo.ttft_ms);
    dom.sloTpot.value = sweep.slo.tpot_ms === null ? "" : String(sweep.slo.tpot_ms);
    if (sweep.burstiness !== null) dom.burstiness.value = String(sweep.burstiness);
    dom.backend.value = sweep.simulated ? "sim" : "model";
  }

  /** `{payload, errors}`: the `sweep` event's payload, and what is wrong with the form as [{field, message}]. */
  function read() {
    const errors = [];
    const src = current();
    if (!src) return { payload: null, errors: [{ field: "workload", message: "workload: the presets have not loaded yet" }] };
    const parts = dom.rates.value.split(/[\s,;]+/).filter(Boolean);
    const rates = parts.map(Number);
    if (!parts.length || rates.some((r) => !Number.isFinite(r) || r <= 0)) {
      errors.push({ field: "rates", message: "rates: give request rates above 0, separated by commas, such as 0.5, 1, 2, 4" });
    }
    const n = generated(src) ? number(dom.n, "generate.n", errors, { integer: true }) : null;
    if (generated(src) && n === null && !errors.length) errors.push({ field: "generate.n", message: "generate.n: how many requests per rate?" });
    const burstiness = traced(src) ? null : number(dom.burstiness, "burstiness", errors);
    const sloTtft = number(dom.sloTtft, "slo_ttft_ms", errors);
    const sloTpot = number(dom.sloTpot, "slo_tpot_ms", errors);
    const lanes = [...dom.laneChecks.querySelectorAll("input[data-lane]")].filter((c) => c.checked)
      .map((c) => src.lanes[Number(c.dataset.lane)]);
    if (!lanes.length) errors.push({ field: "lanes", message: "lanes: tick at least one lane" });
    const { requests, generate, ...rest } = src.workload;
    const workload = generated(src) ? { ...rest, generate: { ...generate, n } } : traced(src) ? rest : { ...rest, requests };
    const payload = { workload, rates, lanes, backend: dom.backend.value };
    if (burstiness !== null) payload.burstiness = burstiness;
    if (sloTtft !== null) payload.slo_ttft_ms = sloTtft;
    if (sloTpot !== null) payload.slo_tpot_ms = sloTpot;
    return { payload, errors };
  }

  /** Put each error next to its field; the rest (no field, or one the form has not) goes to the general line. */
  function showErrors(errors, sentLanes = null) {
    for (const node of dom.form.querySelectorAll("[data-error-for]")) node.textContent = "";
    for (const node of dom.form.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
    const general = [];
    for (const { field, message } of errors) {
      const key = formKey(field);
      const slot = key && dom.form.querySelector(`[data-error-for="${key}"]`);
      if (!slot) { general.push(message); continue; }
      slot.textContent = slot.textContent ? `${slot.textContent} ${message}` : message;
      const input = dom.form.querySelector(`[data-field="${key}"]`);
      if (input) input.setAttribute("aria-invalid", "true");
      const index = /^lanes\[(\d+)\]/.exec(field);
      if (index && sentLanes) {  // lanes[i] counts the lanes sent: find that one's checkbox
        const i = sources.length && current() ? current().lanes.indexOf(sentLanes[Number(index[1])]) : -1;
        const box = dom.laneChecks.querySelector(`input[data-lane="${i}"]`);
        if (box) box.setAttribute("aria-invalid", "true");
      }
    }
    dom.generalError.textContent = general.join(" ");
    return general;
  }

  /** {rates, lanes, requests} the form would run now, for the cost note. */
  function summary() {
    const src = current();
    const rates = dom.rates.value.split(/[\s,;]+/).filter(Boolean).length;
    const lanes = dom.laneChecks.querySelectorAll("input[data-lane]:checked").length;
    const requests = generated(src) ? Number(dom.n.value) || 0 : src && Array.isArray(src.workload.requests) ? src.workload.requests.length : 0;
    return { rates, lanes, requests };
  }

  return { setSources, loadSweep, read, showErrors, summary, refresh: showSource };
}
