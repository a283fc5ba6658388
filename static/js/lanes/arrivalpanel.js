/**
 * The editor's arrival-process panel: N requests arriving as a Poisson process at a rate (requests/s),
 * or burstier (Gamma, burstiness < 1), seeded, with output and prompt lengths drawn from a list
 * ("8,16,32") or a range ("8-32"). It reads the panel into a `generate` spec (engine/workload/arrivals.py) and
 * hands it to `onGenerate`; what comes back fills the request rows. Field names are the server's
 * (`generate.rate`), so a 400 from /api/generate lands next to its field.
 */
import { el } from "../ui/dom.js";
import { checkInt, checkNumber, errorSlot, field, numberInput, textInput } from "./fields.js";
import { count } from "../core/words.js";

const DEFAULTS = Object.freeze({ n: 12, rate: 2, burstiness: 1, seed: 0, output_tokens: { min: 8, max: 24 },
  prompt_words: { min: 8, max: 32 } });

/** "8,16,32" -> [8, 16, 32]; "8-32" -> {min: 8, max: 32}; null when it is neither. */
export function parseLengths(text) {
  const s = String(text).replace(/\s+/g, "");
  const range = /^(\d+)-(\d+)$/.exec(s);
  if (range) return { min: Number(range[1]), max: Number(range[2]) };
  if (/^\d+(,\d+)*$/.test(s)) return s.split(",").map(Number);
  return null;
}

/** The text a length spec shows as: a list "8,16,32" or a range "8-32". */
export function formatLengths(spec) {
  if (Array.isArray(spec)) return spec.join(",");
  return spec && typeof spec === "object" ? `${spec.min}-${spec.max}` : "";
}

/**
 * Ask the server for the requests an arrival process (or a trace slice: `spec.trace`) draws; resolves to the input
 * action main.js handles: {type: "generated", requests, workload} or {type: "generated", field, message}.
 */
export function requestGenerated(spec) {
  return fetch("/api/generate", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(spec) })
    .then((r) => r.json().then((body) => (r.ok ? { type: "generated", requests: body.requests || [], workload: body.workload || null }
      : { type: "generated", field: body.field, message: String(body.error || "could not generate") })))
    .catch(() => ({ type: "generated", field: spec.trace ? "trace" : "generate", message: "could not reach the server" }));
}

export function createArrivalPanel(container, { onGenerate }) {
  let limits = { max_requests: 32 };
  let kept = {};  // spec keys without a field here (own prompts, ignore_eos): carried through unchanged
  const f = {
    n: numberInput(DEFAULTS.n, 1, limits.max_requests),
    rate: numberInput(DEFAULTS.rate, 0.001, 1000, "", "any"),
    burstiness: numberInput(DEFAULTS.burstiness, 0.01, 100, "", "any"),
    seed: numberInput(DEFAULTS.seed, 0, 2 ** 31 - 1),
    output_tokens: textInput(formatLengths(DEFAULTS.output_tokens), "8,16,32 or 8-32"),
    prompt_words: textInput(formatLengths(DEFAULTS.prompt_words), "8-32"),
  };
  const button = el("button", { type: "button", className: "secondary", id: "generate", text: "Generate" });
  const note = el("span", { className: "note",
    text: "burstiness 1 = Poisson, below 1 burstier; lengths as a list (8,16,32) or a range (8-32)" });
  container.append(
    el("div", { className: "generate-fields" }, [
      field("generate.n", "requests", f.n),
      field("generate.rate", "rate (requests/s)", f.rate),
      field("generate.burstiness", "burstiness", f.burstiness),
      field("generate.seed", "seed", f.seed),
      field("generate.output_tokens", "output tokens", f.output_tokens),
      field("generate.prompt_words", "prompt words", f.prompt_words),
      button]),
    note, errorSlot("generate", "p"));

  function load(spec) {
    const s = spec && typeof spec === "object" ? spec : {};
    const { n, rate, burstiness, seed, output_tokens: out, prompt_words: words, ...rest } = s;
    kept = rest;
    f.n.value = String(n ?? DEFAULTS.n);
    f.rate.value = String(rate ?? DEFAULTS.rate);
    f.burstiness.value = String(burstiness ?? DEFAULTS.burstiness);
    f.seed.value = String(seed ?? DEFAULTS.seed);
    f.output_tokens.value = formatLengths(out ?? DEFAULTS.output_tokens);
    f.prompt_words.value = kept.prompts ? "" : formatLengths(words ?? DEFAULTS.prompt_words);
    f.prompt_words.placeholder = kept.prompts ? `${count(kept.prompts.length, "prompt")} of your own` : "8-32";
  }

  /** The panel as a `generate` spec; problems go onto `errors`. */
  function read(errors) {
    const spec = { ...kept,
      n: checkInt(f.n.value, "generate.n", 1, limits.max_requests, errors),
      rate: checkNumber(f.rate.value, "generate.rate", 0.001, 1000, errors),
      burstiness: checkNumber(f.burstiness.value, "generate.burstiness", 0.01, 100, errors),
      seed: checkInt(f.seed.value, "generate.seed", 0, 2 ** 31 - 1, errors) };
    for (const key of ["output_tokens", "prompt_words"]) {
      if (key === "prompt_words" && kept.prompts && !f[key].value.trim()) continue;
      const lengths = parseLengths(f[key].value);
      if (lengths) spec[key] = lengths;
      else errors.push({ field: `generate.${key}`, message: "a list like 8,16,32 or a range like 8-32" });
    }
    if (spec.prompt_words) delete spec.prompts;
    return spec;
  }

  function setLimits(next) {
    limits = { ...limits, ...next };
    f.n.max = String(limits.max_requests);
  }

  button.addEventListener("click", () => onGenerate());
  return { load, read, setLimits };
}
