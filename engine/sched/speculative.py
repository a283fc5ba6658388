"""Speculative decoding by prompt lookup: propose tokens from n-gram matches, verify them in one forward.

No draft model. `propose` looks for the request's last n tokens (n from `max_ngram` down to `min_ngram`)
earlier in its prompt + output and proposes the up-to-k tokens that followed the latest match (as vLLM's
ngram proposer and transformers' `prompt_lookup_num_tokens` do). The scheduler feeds a decode row
[last token] + proposals at the request's KV length; the runner returns the greedy token at every
column of that row, and `accept` keeps the proposals the model agrees with, plus the model's own token
at the first mismatch (or the bonus token after all k): greedy, so the output is token-exact with
generate(). The K/V written for rejected proposals stays in the row beyond its length, unread (every
query's mask stops at its own position) until later tokens overwrite it.

This module knows token lists and nothing else: no tensors, no slots, no policies. Only greedy requests
(temperature 0) without stop strings or a grammar get proposals; the others decode one token a step as before.
"""
from engine.config import SpeculativeConfig


def propose(tokens: list[int], k: int, max_ngram: int = 3, min_ngram: int = 1) -> list[int]:
    """Up to `k` tokens that followed the latest earlier occurrence of the longest tail n-gram of `tokens`
    (n from max_ngram down to min_ngram); [] when no tail n-gram occurs earlier."""
    if k <= 0:
        return []
    for n in range(min(max_ngram, len(tokens) - 1), min_ngram - 1, -1):
        tail = tokens[-n:]
        for start in range(len(tokens) - n - 1, -1, -1):  # latest match first; it must end before the tail
            if tokens[start:start + n] == tail:
                return tokens[start + n:start + n + k]
    return []


def accept(proposals: list[int], greedy: list[int]) -> list[int]:
    """The tokens a verified row writes: `greedy[i]` is the model's argmax after the row's column i (column 0
    is the last written token, column i the i-th proposal). Proposals are kept while each equals the argmax
    before it; then the model's own token follows (its correction at the first mismatch, or the bonus token
    after all of them)."""
    assert len(greedy) == len(proposals) + 1, "one greedy token per column of the row"
    return greedy[:num_accepted(proposals, greedy) + 1]


def num_accepted(proposals: list[int], written: list[int]) -> int:
    """How many of `written` (the model's tokens, or a step's, perhaps cut by a stop) are proposals it agreed with:
    the length of their common beginning."""
    n = 0
    while n < min(len(proposals), len(written)) and proposals[n] == written[n]:
        n += 1
    return n


def proposals_for(request, config: SpeculativeConfig, blocks, others: list, token_budget: int | None) -> list[int]:
    """What `request` proposes this step: prompt lookup over its prompt + output, for greedy requests without stop
    strings or a grammar only (a sampled token cannot be verified by argmax; a stop string needs the text after
    every token; a grammar masks each column by the tokens before it). At most: what it may still write less one (max_new_tokens), what the step's token budget leaves
    once each of `others` (running requests whose rows are not built yet) has its one token, and what the KV
    blocks (`block_manager.BlockManager`) hold once each of `others` may write one more token."""
    spec = request.spec
    limit = min(config.k, spec.max_new_tokens - request.num_tokens - 1)
    if token_budget is not None:
        limit = min(limit, token_budget - 1 - len(others))
    if spec.temperature != 0 or spec.stop or spec.grammar is not None or limit <= 0:
        return []
    proposals = propose(list(spec.prompt_ids) + request.output_ids, limit, config.max_ngram, config.min_ngram)
    reserved = sum(blocks.extra_blocks(o, o.num_cached + 1) for o in others)
    while proposals and not blocks.can_grow(request, request.num_cached + 1 + len(proposals), reserved):
        proposals.pop()
    return proposals


def cell_facts(proposals: list[int], written: int | list[int] | None) -> dict:
    """What a speculative row's cell records (SlotRecord fields): the step's last token as `token_id`, every
    token it wrote as `tokens` (only when more than one), how many it proposed and how many of those it kept."""
    if not isinstance(written, list):
        return {"token_id": written}
    return {"token_id": written[-1], "tokens": tuple(written) if len(written) > 1 else None,
            "proposed": len(proposals), "accepted": num_accepted(proposals, written)}


def text_upto(written, stopped_at_eos: bool) -> int | None:
    """Where a cell's text ends among its request's tokens: before a closing EOS when the cell wrote several
    tokens (their text is the response's; the EOS writes none), else at the end (None)."""
    return -1 if stopped_at_eos and isinstance(written, list) and len(written) > 1 else None
