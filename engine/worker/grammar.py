"""Constrained decoding of JSON (the OpenAI endpoint's `response_format`) with xgrammar, where it is installed.

A request's spec carries a compiled grammar; the runner gives the request a matcher of its own (on the `Request`,
like its random generator), masks that row's logits to the tokens the grammar allows before it picks, and
advances the matcher with the token it picked. Rows without a grammar never come here and cost nothing. Once
the JSON is complete the grammar allows only EOS, so the request stops there (a request that reaches
max_tokens first ends with unfinished JSON, as on vLLM). What it does not know: HTTP, the OpenAI format, slots.
"""
import functools

import torch

from engine.request import Request


def missing() -> str | None:
    """Why constrained decoding is unavailable here (None: it is)."""
    try:
        import xgrammar  # noqa: F401
    except ImportError as e:
        return f"xgrammar is not installed ({e})"
    return None


@functools.lru_cache(maxsize=4)
def _compiler(tokenizer, vocab_size: int, stop_ids: tuple[int, ...]):
    import xgrammar as xgr
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=list(stop_ids))
    return xgr.GrammarCompiler(info)


def compile_json(lm, schema: str | None):
    """A compiled grammar of any JSON object (`schema` None) or of JSON that keeps to `schema` (a JSON Schema
    text); ValueError naming what is wrong with a schema it cannot compile."""
    compiler = _compiler(lm.tokenizer, lm.model.config.vocab_size, tuple(sorted(lm.eos_ids)))
    if schema is None:
        return compiler.compile_builtin_json_grammar()
    try:
        return compiler.compile_json_schema(schema, any_whitespace=False)  # compact JSON: no run of spaces to wander in
    except (RuntimeError, ValueError, TypeError) as e:
        raise ValueError(f"the JSON schema cannot be compiled: {e}") from None


def mask(logits: torch.Tensor, wanted: list[tuple[int, int, int, Request]]) -> torch.Tensor:
    """The logits (W, V) with every row of a constrained request masked to what its grammar allows next (the same
    tensor when no row has a grammar)."""
    rows = [i for i, w in enumerate(wanted) if w[3].spec.grammar is not None]
    if not rows:
        return logits
    import xgrammar as xgr
    logits = logits.clone()
    bitmask = xgr.allocate_token_bitmask(len(rows), logits.shape[-1])     # (R, ceil(V / 32)) int32
    for k, i in enumerate(rows):
        request = wanted[i][3]
        if request.matcher is None:
            request.matcher = xgr.GrammarMatcher(request.spec.grammar)
        request.matcher.fill_next_token_bitmask(bitmask, k)
    sub = logits[rows].float()
    xgr.apply_token_bitmask_inplace(sub, bitmask.to(sub.device))
    logits[rows] = sub.to(logits.dtype)
    return logits


def advance(wanted: list[tuple[int, int, int, Request]], chosen: list[int]) -> None:
    """Each constrained request's matcher past the token it was given."""
    for (_, _, _, request), token in zip(wanted, chosen):
        if request.spec.grammar is not None:
            assert request.matcher.accept_token(token), "a masked pick the grammar does not accept"
