"""Replayed traces on the real SmolLM2: its tokenizer reads the trace text as trace_text.py counts it (one token a
word, 24 + 8 tokens of template and digits), equal hash ids are equal token blocks and unequal ids different ones,
and the prefix cache's hit ratio on a Mooncake slice is the one its hash ids give (tests/engine/workload/test_trace.py: the simulator)."""
import random

import pytest

from engine import Engine, lane_metrics, parse_workload
from engine.limits import CLI_LIMITS
from engine.workload.trace import SLICES, check_spec, hash_hit_ratio, read_trace, slice_rows, trace_blocks, trace_workload
from engine.workload.trace_text import HEAD_TOKENS, SUFFIX_TOKENS, WORDS, filler_prompt

MOONCAKE = SLICES / "mooncake-conversation.jsonl"
B = 32
SPEC = {"file": str(MOONCAKE), "window": "0:6", "time_scale": 1, "length_scale": 0.0625, "output_scale": 0.01}


def real_blocks(blocks: list[tuple[list[int], int]]) -> list[tuple[list[int], int]]:
    """The same blocks as the real model's prompt holds them: the template's 6 closing tokens follow the text, so a
    prompt's last block (cut short, or a new one) is its own, shared with no other prompt."""
    out = []
    for i, (ids, n) in enumerate(blocks):
        full = n // B
        tail = -(-(n + SUFFIX_TOKENS - full * B) // B)
        out.append((ids[:full] + [-(i * 100 + k + 1) for k in range(tail)], n + SUFFIX_TOKENS))
    return out


@pytest.mark.model
def test_the_tokenizer_reads_one_token_a_word_and_the_first_block_as_template_and_digits(smol):
    text = filler_prompt(200, random.Random(0))
    assert len(smol.encode_prompt(text)) == 200  # 24 + 170 words + 6: what the simulator counts (30 + 170)
    assert all(len(smol.tokenizer.encode(f"a {w} b")) == 3 for w in WORDS)
    w = trace_workload(read_trace(MOONCAKE), check_spec(SPEC))
    for r, (ids, n) in zip(w["requests"], trace_blocks(slice_rows(read_trace(MOONCAKE), check_spec(SPEC)),
                                                      check_spec(SPEC), 10**6)):
        toks = smol.encode_prompt(r["prompt"])
        assert len(toks) == n + SUFFIX_TOKENS
        assert smol.tokenizer.decode(toks[HEAD_TOKENS - 8:HEAD_TOKENS]) == r["prompt"][:8]  # the 8 digits end block 0


@pytest.mark.model
def test_equal_hash_ids_give_equal_token_blocks_and_unequal_ids_different_ones_on_the_real_model(smol):
    sp = check_spec(SPEC)
    rows = slice_rows(read_trace(MOONCAKE), sp)
    w = trace_workload(read_trace(MOONCAKE), sp)
    blocks, by_block = {}, {}
    for r, (ids, n) in zip(w["requests"], trace_blocks(rows, sp, 10**6)):
        toks = smol.encode_prompt(r["prompt"])
        for i, h in enumerate(ids[:n // B]):
            block = tuple(toks[i * B:(i + 1) * B])
            assert blocks.setdefault((h, i == 0), block) == block
    for key, block in blocks.items():
        assert by_block.setdefault(block, key) == key
    assert len(blocks) > 40


@pytest.mark.model
def test_the_prefix_cache_hit_ratio_equals_the_ratio_its_hash_ids_give_on_the_real_model(smol):
    sp = check_spec(SPEC)
    blocks = trace_blocks(slice_rows(read_trace(MOONCAKE), sp), sp, 10**6)
    obj = {**trace_workload(read_trace(MOONCAKE), sp), "slots": 1, "kv_budget": 65536,
           "lanes": [{"name": "prefix cache", "policy": "continuous", "prefix_cache": True}]}
    engine = Engine(smol, CLI_LIMITS)
    run = engine.start(engine.prepare(parse_workload(obj, CLI_LIMITS)))
    run.run_to_end()
    m = lane_metrics(run.lanes["prefix cache"].records, run.workload)
    assert m["prompt_tokens_computed"] + m["prompt_tokens_cached"] == sum(n + SUFFIX_TOKENS for _, n in blocks)
    assert m["prefix_cache_hit_rate"] == pytest.approx(hash_hit_ratio(real_blocks(blocks), B, as_cache=True), abs=1e-12)
    trace_ratio = hash_hit_ratio(blocks, B)
    last = sum(n - (len(ids) - 1) * B + SUFFIX_TOKENS for ids, n in blocks) / sum(n for _, n in blocks)
    assert trace_ratio - last <= m["prefix_cache_hit_rate"] <= trace_ratio
    assert m["prefix_cache_hit_rate"] > 0.1
