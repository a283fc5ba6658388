"""Incremental detokenization: the text a request's newest tokens add, decoding only a few tokens a step.

Decoding a response from its first token every step costs O(n) a step, O(n²) over a long answer. Here each request
keeps two offsets into its tokens (as transformers' TextStreamer and vLLM's detokenizer do): `read`, the tokens whose
text is out, and `prefix`, where the window it decodes starts (the token(s) before `read`, so that a tokenizer whose
pieces depend on the one before still spells them right). The new text is decode(tokens[prefix:]) less
decode(tokens[prefix:read]). A character split across tokens decodes as U+FFFD until its last byte comes: such text
is held back (the offsets stay) until it completes, or until the request's last token (`final`), when whatever is
left goes out. This module knows a decode function and token lists; nothing of tensors, slots or requests.
"""
from typing import Callable

Decode = Callable[[list[int]], str]


def next_text(decode: Decode, ids: list[int], prefix: int, read: int, final: bool = False) -> tuple[str, int, int]:
    """(the text ids[read:] add after ids[:read], the new prefix offset, the new read offset)."""
    if len(ids) <= read:
        return "", prefix, read
    before = decode(ids[prefix:read]) if read > prefix else ""
    now = decode(ids[prefix:])
    if len(now) <= len(before) or now.endswith("\ufffd") and not final:
        return "", prefix, read
    return now[len(before):], read, len(ids)
