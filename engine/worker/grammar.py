"""Constrained decoding (structured output: JSON, a regex, a choice, a grammar) with llguidance.

A request's spec carries an llguidance grammar as text (engine.structured makes and checks it); the first time the
request is picked for, the runner gives it a matcher of its own (on the `Request`, like its random generator),
compiled against the model's tokenizer here, where the model is. Every step the row's logits are masked to the
tokens the grammar allows before the pick, and the matcher is advanced with the token picked. Rows without a
grammar never come here and cost nothing. Once the text is complete the grammar allows only EOS, so the request
stops there (a request that reaches max_tokens first ends with its text unfinished, as on vLLM). Ids the model
has beyond the tokenizer's vocabulary (a padded embedding) are never allowed. What it does not know: HTTP, the
OpenAI format, slots.
"""
import functools

import llguidance
import llguidance.hf
import torch

from engine.request import Request

BITS = torch.arange(32, dtype=torch.int32)   # bit b of a mask word allows token 32 * word + b


@functools.lru_cache(maxsize=4)
def _tokenizer(tokenizer, vocab_size: int, stop_ids: tuple[int, ...]) -> llguidance.LLTokenizer:
    return llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size, eos_token=list(stop_ids) or None)


def tokenizer(lm) -> llguidance.LLTokenizer:
    """The model's tokenizer as llguidance reads it (made once per model: about half a second), with the model's
    vocabulary size and its EOS ids (the tokenizer's own where the model names none)."""
    return _tokenizer(lm.tokenizer, lm.model.config.vocab_size, tuple(sorted(lm.eos_ids)))


def matcher(lm, grammar: str) -> llguidance.LLMatcher:
    """A fresh matcher of `grammar` (engine.structured's text) over the model's tokens, at the text's start."""
    return llguidance.LLMatcher(tokenizer(lm), grammar, log_level=0)


def allowed(bitmask: torch.Tensor, vocab: int) -> torch.Tensor:
    """The (R, vocab) bool mask of a (R, ceil(vocab / 32)) int32 bitmask."""
    bits = (bitmask[:, :, None] >> BITS) & 1                  # (R, W, 32)
    return bits.reshape(len(bitmask), -1)[:, :vocab].bool()


def mask(logits: torch.Tensor, wanted: list[tuple[int, int, int, Request]], lm) -> torch.Tensor:
    """The logits (W, V) with every row of a constrained request masked to what its grammar allows next (the same
    tensor when no row has a grammar)."""
    rows = [i for i, w in enumerate(wanted) if w[3].spec.grammar is not None]
    if not rows:
        return logits
    # here, not at the top: llguidance.torch decorates a function with torch.compile, which imports inductor
    # (~1.9 s a process, every server and test worker, constrained requests or not)
    from llguidance.torch import fill_next_token_bitmask
    vocab = logits.shape[-1]
    bitmask = torch.zeros((len(rows), (vocab + 31) // 32), dtype=torch.int32)   # (R, ceil(V / 32))
    broken = []
    for k, i in enumerate(rows):
        request = wanted[i][3]
        if request.matcher is None:
            request.matcher = matcher(lm, request.spec.grammar)
        if request.matcher.is_error():   # a grammar this tokenizer cannot serve (checked text seldom is): EOS ends it
            broken.append(k)
        else:
            fill_next_token_bitmask(request.matcher, bitmask, k)
    ok = allowed(bitmask, vocab)                                                 # (R, V)
    for k in broken:
        ok[k, tokenizer(lm).eos_tokens] = True
    logits = logits.clone()
    index = torch.tensor(rows, device=logits.device)
    logits[index] = logits[index].masked_fill(~ok.to(logits.device), float("-inf"))
    return logits


def advance(wanted: list[tuple[int, int, int, Request]], chosen: list[int]) -> None:
    """Each constrained request's matcher past the token it was given."""
    for (_, _, _, request), token in zip(wanted, chosen):
        if request.spec.grammar is not None and not request.matcher.is_error():
            taken = request.matcher.consume_token(token)
            assert taken, f"a masked pick the grammar does not take: {request.matcher.get_error()}"
