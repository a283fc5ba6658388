/**
 * The glossary: what every metric of the metrics table and every legend item means, in one place, in
 * words a class can read off the projector. The metrics table's headers and the legend's keys over the
 * canvas name a term (`data-term`); tips.js shows its definition on hover and keyboard focus. Plain
 * data and two lookups; knows nothing of the DOM.
 */

/** term key -> {term (how the page names it), text (what it means)}. */
export const GLOSSARY = Object.freeze({
  steps: { term: "steps", text: "Forward passes the lane ran. In one step the model computes one row per busy slot, all at once, so fewer steps for the same requests means less work." },
  tokens: { term: "tokens", text: "Answer tokens the lane wrote (prompt tokens are not counted)." },
  tokens_per_step: { term: "tokens/step", text: "Tokens written divided by steps: how much useful work each forward pass did. With 4 slots, at most 4 (unless speculative decoding lets a cell write several)." },
  slot_use: { term: "slot use", text: "The share of slot-steps that wrote a token: cells that wrote \u00f7 (slots \u00d7 steps). Padding and idle slots pull it down." },
  ttft: { term: "TTFT", text: "Time to first token: from a request's arrival to the end of the step that wrote its first token \u2014 how long a user stares at an empty reply. In steps or ms; p50 / p95 are the median and the 95th percentile over the requests." },
  tpot: { term: "TPOT", text: "Time per output token: after the first token, the average time between one token of a request and its next, (finish \u2212 first token) \u00f7 (tokens \u2212 1)." },
  itl: { term: "ITL", text: "Inter-token latency: every gap between two consecutive tokens of one request, averaged over all of them. A long prefill step of another request shows up here as a stall." },
  latency: { term: "latency", text: "End-to-end latency: from a request's arrival until its whole answer went back to the client. p50 / p95 are the median and the 95th percentile." },
  wall_time: { term: "wall time", text: "The lane's clock at its last step, in seconds: the measured time of every step plus any time it waited for arrivals." },
  tokens_per_s: { term: "tokens/s", text: "Throughput: tokens written divided by wall time." },
  requests_per_s: { term: "requests/s", text: "Requests answered divided by wall time." },
  padding_cells: { term: "padding cells", text: "Slot-steps spent computing a request that had already finished but stays in its static group: work done for nothing." },
  preempted: { term: "preempted", text: "KV memory ran out, so the scheduler evicted a running request to free its memory: it waits again, and its prompt and tokens so far are recomputed later. In the table: how many times that happened." },
  prefill: { term: "prefill", text: "The model reads a request's whole prompt (or a chunk of it) in one step and writes its first token. Marked P." },
  decode: { term: "decode", text: "The model feeds a request's last token back in and writes one more: one row per request per step." },
  padding: { term: "padding", text: "A request that already finished but whose static group is still running: its row is computed anyway, and thrown away (hatched)." },
  idle: { term: "idle slot", text: "No request in this slot in this step: the batch runs with a hole in it." },
  queued: { term: "queued", text: "The request has arrived and waits for a free slot (request view)." },
  waiting: { term: "waiting for arrivals", text: "The lane has nothing it may compute: it waits for more requests to arrive, or to fill a group." },
  last_token: { term: "last token", text: "A request's final token: a bar on the cell's right edge, with a dot when the model itself wrote EOS (end of sequence)." },
  arrival: { term: "request arrives", text: "When a request reaches the server: a triangle above the lane at its arrival time." },
  prefix_cache: { term: "prefix cache", text: "Prompts that start alike (the chat template's system prompt, shared instructions) share their key/value entries: the lane keeps full 16-token blocks of prompts it computed, and a request that starts with the same blocks copies them instead of computing them. The light striped part of a P cell came from the cache." },
  prompt_tokens: { term: "prompt tokens computed / cached", text: "Prompt tokens the lane's prefill steps computed (again after a preemption), and those it took from the prefix cache instead." },
  hit_rate: { term: "prefix cache hit rate", text: "The share of prompt tokens taken from the prefix cache: cached \u00f7 (computed + cached), counted in tokens as vLLM does." },
  speculative: { term: "lookup kept \u00b7 tokens/decode cell", text: "Speculative decoding by prompt lookup: each step a request proposes the tokens that followed the same last words earlier in its prompt or answer, and one forward pass checks them all. Kept: the share of proposed tokens the model agreed with (spec_acceptance_rate). Tokens/decode cell: how many tokens a decode cell wrote on average (1 without speculation). The tokens are exactly those of plain greedy decoding." },
  several_tokens: { term: "several tokens", text: "A speculative decode cell that kept proposals: one tick per token it wrote in this one step, and +N after the request id." },
  kv: { term: "KV memory", text: "The key/value cache: every running request keeps one entry per prompt and answer token. The strip under a lane shows how full it is each step; the dashed line on top is the budget (or, without one, the lane's capacity). At the line, the scheduler must preempt." },
});

/** Metrics-table column key (panels.js) -> its glossary term. */
export const METRIC_TERMS = Object.freeze({
  steps: "steps", tokens: "tokens", tokens_per_step: "tokens_per_step", slot_use: "slot_use",
  mean_ttft_steps: "ttft", mean_ttft_ms: "ttft", ttft_ms_p50_p95: "ttft", mean_tpot_ms: "tpot", mean_itl_ms: "itl",
  latency_steps_p50_p95: "latency", wall_s: "wall_time", tokens_per_s: "tokens_per_s", requests_per_s: "requests_per_s",
  padding_slot_steps: "padding_cells", preemptions: "preempted", speculative: "speculative",
  prompt_tokens: "prompt_tokens", prefix_cache_hit_rate: "hit_rate",
});

/** The definition of a term key, or null. */
export function define(key) {
  return Object.prototype.hasOwnProperty.call(GLOSSARY, key) ? GLOSSARY[key] : null;
}
