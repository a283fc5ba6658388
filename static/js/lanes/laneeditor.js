/**
 * The editor's lanes: up to `max_lanes` rows, each a lane configuration — a name, a batching policy
 * and the options that policy allows (slots, KV budget, prompt lookup k for any lane; the options its traits name:
 * max wait for dynamic; scheduling policy, chunk size, max batch tokens, prefix cache for continuous). An empty
 * option inherits the workload's default. A row reads back as a bare policy name when it is a plain lane, else
 * `{name, policy, ...options}`, the shape the server's `lanes` takes; its fields are named `lanes[i].chunk_size`
 * like the server's errors. Where the server says vLLM is installed (model_status.vllm) the policy list offers
 * "vLLM", a lane run by a real vLLM engine (`{name, engine: "vllm", policy: "continuous", ...}`: slots, KV budget,
 * chunk size, max batch tokens, prefix cache); elsewhere a line says how to install it. Knows nothing of requests or
 * the socket.
 */
import { DEFAULT_LANES, ENGINE_POLICIES } from "../core/catalog.js";
import { el } from "../ui/dom.js";
import { laneConfig } from "../core/laneconfig.js";
import { checkInt, checkKvBudget, checkNumber, checkText, errorSlot, field, numberInput, select, textInput } from "./fields.js";
import { OPTION_POLICIES, ORDERS, takes } from "../core/policies.js";
import { LANE_ORDER } from "../core/vocab.js";

/** Which policies may set an option (their traits' options; the max-wait field stands for max_wait and
 * max_wait_ms); the rest apply to every lane. */
const ONLY_FOR = Object.freeze(Object.fromEntries(Object.entries(OPTION_POLICIES).map(([k, v]) => [k, v.join(" ")])));
// lane options without a field here: carried through unchanged (a fleet's too: data_parallel_size, its router and knobs;
// a P/D lane's disaggregation: its prefill and decode engine counts; a tensor-parallel lane's tensor_parallel_size;
// a pipeline-parallel lane's stages and micro-batches)
const KEPT = ["kv_block_size", "fused", "kv_allocation", "preemption", "data_parallel_size", "router", "cache_threshold",
  "balance_abs_threshold", "balance_rel_threshold", "router_seed", "overlap_score_weight", "disaggregation",
  "tensor_parallel_size", "pipeline_parallel_size", "micro_batches"];
const SPEC_K_MAX = 16;  // engine/sched/speculative.py's bound on k
const VLLM = "vllm";  // the policy select's value for a vLLM lane (its engine; its policy is continuous)
const VLLM_HIDES = ["scheduling_policy", "speculative"];  // options a vLLM lane cannot take (engine/peers/vllm_options.py)

export function createLaneList(container, { onChange }) {
  let limits = { max_lanes: 4, max_slots: 16, max_kv_budget: 65536, min_kv_budget: 16, max_wait: 100, max_arrival_ms: 600000,
    max_id_chars: 32 };
  let defaultBlock;  // the workload's kv_block_size, which a lane inherits unless it sets its own
  let timed = false;
  const kept = new WeakMap();  // row -> options it carries without a field
  const speculativeOf = new WeakMap();  // row -> the speculative option it was loaded with (max_ngram, min_ngram kept)
  let vllm = { on: false, problem: null };  // the server's vLLM lane capability
  const rows = el("div", { className: "lane-rows" });
  const addButton = el("button", { type: "button", className: "secondary", id: "add-lane", text: "+ Add lane" });
  const vllmHint = el("p", { className: "hint", id: "vllm-hint", hidden: true });
  container.append(rows, el("div", { className: "lane-actions" }, [addButton, errorSlot("lanes")]), vllmHint);
  const asPolicy = (value) => (value === VLLM ? ENGINE_POLICIES.vllm : value);
  const policyChoices = (current) => [...LANE_ORDER.map((p) => [p, p]),
    ...(vllm.on || current === VLLM ? [[VLLM, "vLLM (real engine)"]] : [])];

  const waitKey = () => (timed ? "max_wait_ms" : "max_wait");
  const inputs = (row) => Object.fromEntries([...row.querySelectorAll("[data-field]")].map((n) => [n.dataset.key, n]));

  function sync(row) {  // show the options the row's policy allows
    const value = inputs(row).policy.value;
    const policy = asPolicy(value);
    row.querySelectorAll("[data-only-for]").forEach((label) => { label.hidden = !label.dataset.onlyFor.split(" ").includes(policy); });
    for (const key of VLLM_HIDES) {
      const label = inputs(row)[key].closest("label");
      if (value === VLLM) label.hidden = true;
      else if (!label.dataset.onlyFor) label.hidden = false;
    }
  }

  function addRow(entry) {
    const i = rows.children.length;
    const c = laneConfig(entry);
    const { engine, ...o } = c.options;
    if (engine === VLLM) c.policy = VLLM;
    const at = (key) => `lanes[${i}].${key}`;
    const make = {
      name: () => field(at("name"), "name", textInput(c.name)),
      policy: () => field(at("policy"), "policy", select(policyChoices(c.policy), c.policy)),
      slots: () => field(at("slots"), "slots", numberInput(o.slots, 1, limits.max_slots, "default")),
      kv_budget: () => field(at("kv_budget"), "KV budget", numberInput(o.kv_budget, limits.min_kv_budget, limits.max_kv_budget, "default")),
      max_wait: () => field(at(waitKey()), timed ? "max wait ms" : "max wait steps",
        numberInput(o.max_wait ?? o.max_wait_ms, 0, timed ? limits.max_arrival_ms : limits.max_wait, "default", timed ? "any" : "1")),
      scheduling_policy: () => field(at("scheduling_policy"), "scheduling",
        select([["", "default"], ...ORDERS.map((order) => [order.name, order.name])], o.scheduling_policy ?? "")),
      chunk_size: () => field(at("chunk_size"), "chunk size", numberInput(o.chunk_size, 1, limits.max_kv_budget, "off")),
      max_batch_tokens: () => field(at("max_batch_tokens"), "max batch tokens", numberInput(o.max_batch_tokens, 1, limits.max_kv_budget, "off")),
      prefix_cache: () => field(at("prefix_cache"), "prefix cache", select([["", "off"], ["on", "on"]], o.prefix_cache ? "on" : "")),
      speculative: () => field(at("speculative"), "prompt lookup k",
        numberInput(o.speculative ? o.speculative.k : undefined, 1, SPEC_K_MAX, "off")),
    };
    const labels = Object.entries(make).map(([key, build]) => {
      const label = build();
      label.querySelector("[data-field]").dataset.key = key;
      if (ONLY_FOR[key]) label.dataset.onlyFor = ONLY_FOR[key];
      return label;
    });
    const remove = el("button", { type: "button", className: "remove", text: "\u00d7", title: "remove this lane" });
    remove.setAttribute("aria-label", "remove this lane");
    const row = el("div", { className: "lane-row", dataset: { lane: String(i) } }, [...labels, remove, errorSlot(`lanes[${i}]`)]);
    inputs(row).policy.dataset.was = c.policy;  // the policy before a change: a lane named after it follows it
    kept.set(row, Object.fromEntries(KEPT.filter((k) => o[k] !== undefined).map((k) => [k, o[k]])));
    if (o.speculative) speculativeOf.set(row, o.speculative);  // its n-gram bounds, if it set them
    rows.append(row);
    sync(row);
  }

  function renumber() {  // keep data-field names in step with row positions after a removal
    [...rows.children].forEach((row, i) => {
      row.querySelectorAll("[data-field], [data-error-for]").forEach((node) => {
        const key = node.dataset.field !== undefined ? "field" : "errorFor";
        node.dataset[key] = node.dataset[key].replace(/^lanes\[\d+\]/, `lanes[${i}]`);
      });
    });
  }

  function refresh() {
    addButton.disabled = rows.children.length >= limits.max_lanes;
    const only = rows.children.length <= 1;
    rows.querySelectorAll("button.remove").forEach((b) => { b.disabled = only; });
  }

  function load(lanes, isTimed, blockSize) {
    timed = isTimed;
    defaultBlock = blockSize;
    rows.replaceChildren();
    for (const entry of lanes && lanes.length ? lanes : DEFAULT_LANES) addRow(entry);
    refresh();
  }

  /** The lanes as the server takes them; problems go onto `errors`. */
  function read(errors) {
    const names = new Set();
    const lanes = [...rows.children].map((row, i) => {
      const f = inputs(row);
      const isVllm = f.policy.value === VLLM;
      const policy = asPolicy(f.policy.value);
      const name = checkText(f.name.value.trim(), f.name.dataset.field, limits.max_id_chars, errors) || (isVllm ? "vLLM" : policy);
      if (names.has(name)) errors.push({ field: `lanes[${i}].name`, message: "another lane has this name" });
      names.add(name);
      const options = { ...kept.get(row) };
      const int = (key, hi) => checkInt(f[key].value, f[key].dataset.field, 1, hi, errors, true);
      const add = (key, value) => { if (value !== undefined) options[key] = value; };
      add("slots", int("slots", limits.max_slots));
      const block = options.kv_block_size ?? defaultBlock ?? limits.min_kv_budget;
      add("kv_budget", checkKvBudget(f.kv_budget.value, f.kv_budget.dataset.field, block, limits.max_kv_budget, errors));
      if (takes(policy, waitKey())) {
        add(waitKey(), timed ? checkNumber(f.max_wait.value, f.max_wait.dataset.field, 0, limits.max_arrival_ms, errors, true)
          : checkInt(f.max_wait.value, f.max_wait.dataset.field, 0, limits.max_wait, errors, true));
      }
      if (takes(policy, "scheduling_policy") && f.scheduling_policy.value) options.scheduling_policy = f.scheduling_policy.value;
      if (takes(policy, "chunk_size")) add("chunk_size", int("chunk_size", limits.max_kv_budget));
      if (takes(policy, "max_batch_tokens")) add("max_batch_tokens", int("max_batch_tokens", limits.max_kv_budget));
      if (takes(policy, "prefix_cache") && f.prefix_cache.value === "on") options.prefix_cache = true;
      if (isVllm) return { name, engine: VLLM, policy, ...options };  // vLLM's own defaults for what it leaves unset
      const k = checkInt(f.speculative.value, f.speculative.dataset.field, 1, SPEC_K_MAX, errors, true);
      if (k !== undefined) options.speculative = { ...(speculativeOf.get(row) || { method: "prompt_lookup" }), k };
      return name === policy && !Object.keys(options).length ? policy : { name, policy, ...options };
    });
    if (!lanes.length) errors.push({ field: "lanes", message: "add at least one lane" });
    return lanes;
  }

  /** Arrivals switched between steps and ms: the max-wait fields change unit (and start empty). */
  function setTimed(isTimed) {
    if (isTimed === timed) return;
    timed = isTimed;
    rows.querySelectorAll('[data-key="max_wait"]').forEach((input) => {
      input.value = "";
      input.dataset.field = input.dataset.field.replace(/max_wait(_ms)?$/, waitKey());
      input.step = timed ? "any" : "1";
      input.closest("label").querySelector(".field-label").textContent = timed ? "max wait ms" : "max wait steps";
      input.setAttribute("aria-label", timed ? "max wait ms" : "max wait steps");
      input.parentElement.querySelector(".field-error").dataset.errorFor = input.dataset.field;
    });
  }

  function setLimits(next) {
    limits = { ...limits, ...next };
    rows.querySelectorAll('[data-key="kv_budget"]').forEach((input) => { input.min = String(limits.min_kv_budget); });
    refresh();
  }

  /** The server's vLLM capability (model_status): offer the vLLM lane, or say how to install it. */
  function setVllm(on, problem) {
    vllm = { on: Boolean(on), problem: problem || null };
    for (const row of rows.children) {
      const select = inputs(row).policy;
      const value = select.value;
      select.replaceChildren(...policyChoices(value).map(([v, label]) => el("option", { value: v, text: label })));
      select.value = value;
    }
    vllmHint.hidden = vllm.on;
    vllmHint.textContent = vllm.on ? "" : `A vLLM lane (a real vLLM engine's scheduler and model beside these) `
      + `${vllm.problem || "needs vLLM"}.`;
  }

  addButton.addEventListener("click", () => {
    const used = new Set([...rows.children].map((row) => inputs(row).name.value.trim()));
    const policy = LANE_ORDER.find((p) => !used.has(p)) || LANE_ORDER[LANE_ORDER.length - 1];
    let name = policy;
    for (let k = 2; used.has(name); k += 1) name = `${policy} ${k}`;
    addRow(name === policy ? policy : { name, policy });
    refresh();
    onChange();
  });
  rows.addEventListener("click", (event) => {
    const button = event.target.closest("button.remove");
    if (!button || rows.children.length <= 1) return;
    button.closest(".lane-row").remove();
    renumber();
    refresh();
    onChange();
  });
  rows.addEventListener("change", (event) => {
    if (event.target.dataset.key !== "policy") return;
    const row = event.target.closest(".lane-row");
    const name = inputs(row).name;
    if (!name.value.trim() || name.value.trim() === event.target.dataset.was) name.value = event.target.value;
    event.target.dataset.was = event.target.value;
    sync(row);
  });

  return { load, read, setTimed, setLimits, setVllm };
}
