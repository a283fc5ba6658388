/**
 * Why a request waits, in words: the page's twin of engine/waits.py's WaitReason (identical strings; tests/engine/sched/test_waits.py
 * holds them equal) and the text a wait says, for the tooltip, the request panel and the narration ("R7 waits: 3 KV
 * blocks short"). A step record's `waits` maps every waiting request to {reason, short?, ahead?, missing?, left?}.
 * Pure: strings in, strings out; knows nothing of the DOM or the canvas.
 */
import { count } from "./words.js";

/** Why a waiting request was not admitted in a step (engine/waits.py WaitReason). */
export const WaitReason = Object.freeze({
  NO_SLOT: "no_slot",                // every slot is held
  KV_BLOCKS: "kv_blocks",            // `short` free KV blocks too few for its next prompt chunk
  TOKEN_BUDGET: "token_budget",      // the step's max_batch_tokens is spent
  GROUP_NOT_FULL: "group_not_full",  // static: `missing` members of its group have not arrived
  GROUP_RUNNING: "group_running",    // static, dynamic: the running group holds the lane
  DEADLINE: "deadline",              // dynamic: `left` steps (ms) until the partial group starts anyway
  BEHIND: "behind",                  // it would fit, but `ahead`, first in line, waits for KV blocks
  SWAPPED: "swapped",                // swapped out: `short` free blocks too few to swap back in
  SIBLING: "sibling",                // a parallel sample: waits for its group leader's (`ahead`) prompt
});

/** The glossary's entries, one per reason (glossary.js spreads them in; the request panel's reasons name them). */
export const WAIT_GLOSSARY = Object.freeze({
  wait_no_slot: { term: "waits: no free slot", text: "Every slot of the batch holds a request; it takes the first slot one frees, in admission order." },
  wait_kv_blocks: { term: "waits: KV blocks short", text: "Its prompt needs more free KV blocks than the budget has left (the lane keeps one free block per running request, so their next tokens fit): it is admitted once enough are freed." },
  wait_token_budget: { term: "waits: token budget", text: "The rows before it in this step used the step's max_batch_tokens: it starts when a step has tokens to spare." },
  wait_group_not_full: { term: "waits: group not full", text: "A static lane starts a group only when all its members have arrived." },
  wait_group_running: { term: "waits: group running", text: "A static or dynamic lane holds every slot until the running group's longest member is done, even where a member finished." },
  wait_deadline: { term: "waits: dynamic deadline", text: "A dynamic lane starts a partial group only once its oldest request has waited max_wait." },
  wait_behind: { term: "waits behind", text: "It would fit, but the request first in line (a higher priority, an earlier arrival or a shorter job) waits for KV blocks, and the lane never lets a later request overtake it." },
  wait_swapped: { term: "waits: swapped out", text: "Preempted by a swap: its KV blocks sit in host memory until enough device blocks are free to copy them back." },
  wait_sibling: { term: "waits for its sibling", text: "A parallel sample of a request: it starts once its group's first sample has computed the prompt they share." },
});

/** The glossary key of a wait ("wait_kv_blocks"), or null for a reason this page does not know. */
export function waitTerm(wait) {
  const key = wait && `wait_${wait.reason}`;
  return key && Object.prototype.hasOwnProperty.call(WAIT_GLOSSARY, key) ? key : null;
}

/**
 * What a wait says after "R7 waits: " ("3 KV blocks short"). `specs`: id -> the workload's request (to say a request
 * ahead has a higher priority); `timed`: arrivals in ms (a deadline's `left` is ms, else steps).
 */
export function waitText(wait, { specs = {}, timed = false, id = null } = {}) {
  if (!wait) return "";
  switch (wait.reason) {
    case WaitReason.NO_SLOT: return "no free slot";
    case WaitReason.KV_BLOCKS: return `${count(wait.short, "KV block", "KV blocks")} short`;
    case WaitReason.TOKEN_BUDGET: return "the step's token budget is spent";
    case WaitReason.GROUP_NOT_FULL: return `its group lacks ${count(wait.missing, "member", "members")}`;
    case WaitReason.GROUP_RUNNING: return "the running group holds the slots";
    case WaitReason.DEADLINE:
      return `a fuller group, or ${timed ? `${Math.round(wait.left)} ms` : count(wait.left, "step", "steps")} more`;
    case WaitReason.BEHIND: {
      const ahead = specs[wait.ahead];
      const own = id !== null ? specs[id] : null;
      const higher = ahead && own && (ahead.priority || 0) > (own.priority || 0);
      return `behind ${wait.ahead} (${higher ? "a higher priority" : "first in line"}), which waits for KV blocks`;
    }
    case WaitReason.SWAPPED: return `swapped out, ${count(wait.short, "KV block", "KV blocks")} short to swap back in`;
    case WaitReason.SIBLING: return `waits for ${wait.ahead}'s prompt, which its samples share`;
    default: return String(wait.reason);
  }
}

// Which reason the narration names first when several requests wait: the one a class would not guess.
const TELLING = [WaitReason.KV_BLOCKS, WaitReason.SWAPPED, WaitReason.BEHIND, WaitReason.TOKEN_BUDGET, WaitReason.DEADLINE,
  WaitReason.GROUP_NOT_FULL, WaitReason.SIBLING, WaitReason.NO_SLOT, WaitReason.GROUP_RUNNING];

/** Reasons a class would not guess from the picture (the narration says them even when a step did more). */
export function isTelling(reason) {
  return reason !== WaitReason.NO_SLOT && reason !== WaitReason.GROUP_RUNNING;
}

/**
 * The narration's wait: the most telling reason in a record's `waits`, with the requests that share its words:
 * {ids, text, reason} ("R7" + "3 KV blocks short"), or null when nobody waits (or the record predates wait reasons).
 */
export function headWait(record, opts = {}) {
  const entries = Object.entries((record && record.waits) || {});
  if (!entries.length) return null;
  const rank = (w) => { const i = TELLING.indexOf(w.reason); return i < 0 ? TELLING.length : i; };
  const [id, first] = entries.reduce((best, e) => (rank(e[1]) < rank(best[1]) ? e : best));
  const text = waitText(first, { ...opts, id });
  const ids = entries.filter(([other, w]) => waitText(w, { ...opts, id: other }) === text).map(([other]) => other);
  return { ids, text, reason: first.reason };
}
