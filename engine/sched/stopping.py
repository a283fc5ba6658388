"""When a request stops: max_new_tokens, an end-of-sequence token, or a stop string its text now holds.

The scheduler's `update_from_output` asks these, token by token and then for the step's text, and is the one
place a request is finished for writing (a client that leaves is cancelled, not stopped). The min_tokens rule is
the runner's: it masks EOS in the logits, so such a request never writes one to stop at. This module knows requests
and text, nothing of slots, tensors or tokenizers (the text comes from the runner's `text_delta`).
"""
from typing import Callable

from engine.request import Request
from engine.sched.speculative import text_upto
from engine.step import StopReason

# the runner's text_delta: (request, its tokens up to, this is its last token) -> the text its newest tokens add
Detokenize = Callable[[Request, int | None, bool], str | None]


def token_stop(request: Request, token: int, eos_ids: frozenset[int]) -> StopReason | None:
    """Why `request` stops at `token`, just appended to its output (None: it goes on)."""
    if request.num_tokens >= request.spec.max_new_tokens:
        return StopReason.LENGTH
    if not request.spec.ignore_eos and token in eos_ids:
        return StopReason.EOS
    return None


def text_of(request: Request, written: int | list[int], detokenize: Detokenize | None) -> str | None:
    """The text `written` (this step's token, or a verified row's kept tokens) adds to `request`'s response (None:
    no tokenizer); if that text completes one of its stop strings, the request stops there (STOP). Earlier text held
    none, so only the new text's tail is searched. Several tokens' text ends before a closing EOS (text_upto)."""
    if detokenize is None:
        return None
    text = detokenize(request, text_upto(written, request.stop is StopReason.EOS), request.stop is not None)
    stops = request.spec.stop
    if text and stops and request.stop is None:
        tail = request.text[-(len(text) + max(map(len, stops)) - 1):]
        if any(stop in tail for stop in stops):
            request.stop = StopReason.STOP
    return text
