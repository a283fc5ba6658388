/**
 * What a batching policy and an admission order are, as the engine declares them (catalog.js: each scheduler's
 * Traits, engine/admission.py's ORDERS): how a lane admits ("group": a whole group, held until its longest member
 * is done; "slot": any free slot, every step), what a group waits for, whether it preempts, which options only it
 * takes, its label. The page asks these, never a policy's name. Pure data and lookups.
 */
import { ADMISSION_ORDERS, POLICIES } from "./catalog.js";

/** A policy the catalog does not know (a run stored by a later engine): admits by slot, takes no options of its own. */
const UNKNOWN = Object.freeze({ admits: "slot", waits_for: null, preempts: false, chunks: false, options: [], description: "" });

/** A policy's traits: {label, admits, waits_for, preempts, chunks, options, description}. */
export function traitsOf(policy) {
  return POLICIES[policy] || { ...UNKNOWN, label: `${policy} batching` };
}

/** Whether a lane of `policy` admits whole groups (static, dynamic) rather than slot by slot (continuous). */
export function admitsGroups(policy) {
  return traitsOf(policy).admits === "group";
}

/** {option: [policies that take it]} for the options only some policies take; every other option is any lane's. */
export const OPTION_POLICIES = Object.freeze(Object.entries(POLICIES).reduce((out, [name, t]) => {
  for (const option of t.options) out[option] = [...(out[option] || []), name];
  return out;
}, {}));

/** Whether a lane of `policy` may set `option` (an option no policy claims is every lane's). */
export function takes(policy, option) {
  return !OPTION_POLICIES[option] || OPTION_POLICIES[option].includes(policy);
}

/** The admission orders in the engine's order: [{name, label, description}]; the first is the default. */
export const ORDERS = ADMISSION_ORDERS;
export const DEFAULT_ORDER = ADMISSION_ORDERS[0].name;

/** Whether `name` is an admission order the engine knows. */
export function isOrder(name) {
  return ADMISSION_ORDERS.some((o) => o.name === name);
}
