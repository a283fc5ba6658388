/**
 * The glossary: what every metric of the metrics table and every legend item means, in one place, in
 * words a class can read off the projector. The metrics table's headers and the legend's keys over the
 * canvas name a term (`data-term`); tips.js shows its definition on hover and keyboard focus. The metrics' terms
 * are the metric table's (engine/report/metric_table.py GLOSSARY, through catalog.js); the drawing's are here. Plain
 * data and two lookups; knows nothing of the DOM.
 */
import { METRIC_GLOSSARY } from "./catalog.js";
import { columnsOf } from "./columns.js";
import { WAIT_GLOSSARY } from "./waits.js";

/** term key -> {term (how the page names it), text (what it means)}. */
export const GLOSSARY = Object.freeze({
  ...METRIC_GLOSSARY,
  ...WAIT_GLOSSARY,  // why a request waits, one entry per reason (waits.js)
  prefill: { term: "prefill", text: "The model reads a request's whole prompt (or a chunk of it) in one step and writes its first token. Marked P." },
  decode: { term: "decode", text: "The model feeds a request's last token back in and writes one more: one row per request per step." },
  padding: { term: "padding", text: "A request that already finished but whose static group is still running: its row is computed anyway, and thrown away (hatched)." },
  idle: { term: "idle slot", text: "No request in this slot in this step: the batch runs with a hole in it." },
  queued: { term: "queued", text: "The request has arrived and waits for a free slot (request view)." },
  routed: { term: "routed", text: "A fleet's replica: a pink triangle where the router sent it a request, at the request's arrival. Hover it for the router's reason (cache_hit, load_balance, round_robin, ...)." },
  replica_load: { term: "replica load", text: "A fleet's replica: its requests running or waiting after each of its steps, as a bar under its slots, on the fleet's one scale. Bars of different heights at one time are the load imbalance." },
  transfer: { term: "KV copy (P/D)", text: "A P/D lane: a prefill engine computes the prompt and writes the first token, then the request's KV blocks are copied into a decode engine's own pool. Above the decode engine's slots: an orange band while the copy runs and a triangle where the request joins its queue. Hover it for the blocks, bytes and ms. The decode engine runs decode steps only, so a long prompt never stalls its decoders; the copy and the queue make the first token later." },
  tp_compute: { term: "compute (TP)", text: "A tensor-parallel lane: the bar under its slots, per step, on the same clock. The blue part is the time each rank computed on its shard of the weights (mean over the ranks, measured in them); hover it for each layer's split." },
  allreduce: { term: "all-reduce (TP)", text: "A tensor-parallel lane: the ranks add their partial results after each layer's attention and MLP (two all-reduces a layer), the orange part of the step's bar; it includes waiting for the slowest rank. On one memory domain it buys nothing back." },
  waiting: { term: "waiting for arrivals", text: "The lane has nothing it may compute: it waits for more requests to arrive, or to fill a group." },
  last_token: { term: "last token", text: "A request's final token: a bar on the cell's right edge, with a dot when the model itself wrote EOS (end of sequence)." },
  arrival: { term: "request arrives", text: "When a request reaches the server: a triangle above the lane at its arrival time. With arrivals in steps a request arrives at a step number, not a time: on the ms clock its triangle sits where that step starts on each lane's own clock, so one request's marks sit at different times on different lanes." },
  prefix_cache: { term: "prefix cache", text: "Prompts that start alike (the chat template's system prompt, shared instructions) share their key/value entries: the lane keeps full 16-token blocks of prompts it computed, and a request that starts with the same blocks copies them instead of computing them. The light striped part of a P cell came from the cache." },
  several_tokens: { term: "several tokens", text: "A speculative decode cell that kept proposals: one tick per token it wrote in this one step, and +N after the request id." },
  kv: { term: "KV memory", text: "The key/value cache: every running request keeps one entry per prompt and answer token. The strip under a lane shows how full it is each step; the dashed line on top is the budget (or, without one, the lane's capacity). At the line, the scheduler must preempt." },
});

/** Metrics-table column key (panels.js) -> its glossary term. */
export const METRIC_TERMS = Object.freeze(Object.fromEntries(columnsOf("page").map((c) => [c.key, c.term])));

/** The definition of a term key, or null. */
export function define(key) {
  return Object.prototype.hasOwnProperty.call(GLOSSARY, key) ? GLOSSARY[key] : null;
}
