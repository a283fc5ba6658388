"""Incremental detokenization (engine.worker.detok): each step decodes only its newest tokens, and the pieces are
exactly those decoding the whole response every step gave (the same text per step, U+FFFD never sent mid-character)."""
import random

from engine.worker.detok import next_text


def whole_decode_deltas(decode, ids: list[int]) -> list[str]:
    """The text each token adds when the response is decoded from its first token every step (as before)."""
    text, out = "", []
    for n in range(1, len(ids) + 1):
        full = decode(ids[:n])
        if full.endswith("\ufffd"):
            out.append("")
            continue
        out.append(full[len(text):])
        text = full
    return out


def incremental_deltas(decode, ids: list[int], final: bool = False) -> list[str]:
    prefix = read = 0
    out = []
    for n in range(1, len(ids) + 1):
        delta, prefix, read = next_text(decode, ids[:n], prefix, read, final and n == len(ids))
        out.append(delta)
    return out


def utf8(ids: list[int]) -> str:
    return bytes(ids).decode("utf-8", errors="replace")


def test_a_character_split_across_tokens_is_held_until_its_last_byte_and_never_sent_as_u_fffd():
    ids = list("naïve 日本 🙂!".encode())   # one byte a token: 2-, 3- and 4-byte characters split over tokens
    deltas = incremental_deltas(utf8, ids)
    assert "".join(deltas) == "naïve 日本 🙂!" and not any("\ufffd" in d for d in deltas)
    assert deltas == whole_decode_deltas(utf8, ids)
    assert deltas[ids.index(0xC3)] == "" and deltas[ids.index(0xC3) + 1] == "ï"


def test_the_last_token_sends_what_is_left_even_an_incomplete_character():
    ids = list("ok 日".encode())[:-1]          # the answer was cut inside its last character
    assert "".join(incremental_deltas(utf8, ids)) == "ok "
    assert "".join(incremental_deltas(utf8, ids, final=True)) == utf8(ids) == "ok \ufffd"


def test_on_a_byte_level_bpe_tokenizer_every_step_sends_what_the_whole_decode_did(tiny):
    tok = tiny.tokenizer
    decode = lambda ids: tok.decode(ids, clean_up_tokenization_spaces=False)  # noqa: E731 (the runner's)
    rng = random.Random(7)
    vocab = len(tok)
    for _ in range(20):
        ids = [rng.randrange(vocab) for _ in range(rng.randrange(1, 60))]
        assert incremental_deltas(decode, ids) == whole_decode_deltas(decode, ids), ids
    text = "Grüße aus Köln: 日本語のテキスト, emoji 🙂🚀 and plain words."
    ids = tok.encode(text, add_special_tokens=False)
    assert "".join(incremental_deltas(decode, ids)) == decode(ids)
    assert incremental_deltas(decode, ids) == whole_decode_deltas(decode, ids)
