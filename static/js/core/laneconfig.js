/**
 * Lanes as configurations: a lane of a run is a bare policy name ("static") or
 * `{name, policy, ...its own options}` (run.workload.lanes, in run order). This module answers what a
 * lane's policy is, in which order the page stacks lanes (by policy, then as given) and how a lane
 * is titled ("chunked 64 — continuous, chunk 64"). Pure; knows nothing of records or the canvas.
 */
import { ENGINE_POLICIES } from "./catalog.js";
import { traitsOf } from "./policies.js";
import { LANE_ORDER } from "./vocab.js";
import { count } from "./words.js";

/** The options a lane may set, with how a title writes each. */
const OPTION_TEXT = Object.freeze({
  slots: (v) => count(v, "slot"),
  chunk_size: (v) => `chunk ${v}`,
  max_batch_tokens: (v) => `${v} tokens/step`,
  kv_budget: (v) => `KV ${v}`,
  kv_block_size: (v) => `KV blocks of ${count(v, "token")}`,
  max_wait: (v) => `max wait ${count(v, "step")}`,
  max_wait_ms: (v) => `max wait ${v} ms`,
  scheduling_policy: (v) => v,
  fused: (v) => (v ? "fused" : "split"),
  prefix_cache: (v) => (v ? "prefix cache" : "no prefix cache"),
  speculative: (v) => (v ? `prompt lookup k ${v.k}` : "no speculation"),
  engine: (v) => (v === "vllm" ? "a real vLLM engine" : ""),
});

/** {name, policy, options} of one entry of workload.lanes. */
export function laneConfig(entry) {
  if (typeof entry === "string") return { name: entry, policy: entry, options: {} };
  const { name, policy: given, ...options } = entry || {};
  const policy = given ?? ENGINE_POLICIES[options.engine];  // a vLLM lane batches as the catalog says (continuous)
  return { name: String(name ?? policy), policy: String(policy), options };
}

/** Every lane configuration of a workload, by lane name. */
export function laneConfigs(workload) {
  const entries = (workload && Array.isArray(workload.lanes)) ? workload.lanes : [];
  return new Map(entries.map((e) => laneConfig(e)).map((c) => [c.name, c]));
}

/** A lane's configuration as the workload writes it (the metrics' block-size rule reads it, as
 * engine/report/metrics.py does); a name the workload does not list is taken as a bare policy name. */
export function configOf(workload, name) {
  return laneConfigs(workload).get(name) || { name, policy: name, options: {} };
}

/** A lane of a run as the engine resolved it (`run_started`'s and a stored run's `lane_configs`, by name):
 * {name, policy, engine, options (what the lane itself says), config (every option's value)}. A lane the run does
 * not describe (a run stored before its workload stopped parsing) has only its name and no options. */
export function resolvedConfig(configs, name) {
  return (configs && configs[name]) || { name, policy: name, options: {}, config: {} };
}

/** Lane names in page order: by policy in the catalog's order (static, dynamic, continuous), keeping the given
 * order within one. `configs`: the run's resolved lane configurations, by name. */
export function orderLanes(names, configs) {
  const rank = (name) => {
    const i = LANE_ORDER.indexOf(resolvedConfig(configs, name).policy);
    return i < 0 ? LANE_ORDER.length : i;
  };
  return names.map((name, i) => [name, i]).sort((a, b) => rank(a[0]) - rank(b[0]) || a[1] - b[1]).map(([name]) => name);
}

/** "continuous, chunk 64" — the policy and the lane's own options ("" for a plain lane). */
export function laneSummary(config) {
  const opts = Object.entries(config.options).filter(([k]) => OPTION_TEXT[k]).map(([k, v]) => OPTION_TEXT[k](v));
  if (config.name === config.policy) return opts.join(", ");
  return [config.policy, ...opts].join(", ");
}

/** A lane's title: "Static batching", "Dynamic batching — max wait 500 ms", "chunked 64 — continuous, chunk 64". */
export function laneTitle(config) {
  const summary = laneSummary(config);
  const head = config.name === config.policy ? traitsOf(config.policy).label : config.name;
  return summary ? `${head} \u2014 ${summary}` : head;
}
