"""The paged KV cache (engine/worker/kv_cache.py): rows read and write K/V only through their block tables.

Hand-made tables drive `ModelRunner.run` directly: random permutations of the pool's blocks, tables that share
prompt blocks, a copy-on-write copy, a swap out and back in: every request writes what generate() writes alone, and
the same as on the slots' own contiguous tables. Plus the pool's size (exactly its blocks) and the copies' round trip.
"""
from dataclasses import replace

import pytest
import torch

from engine.sched.batch import Row
from engine.request import Request, RequestSpec
from engine.worker.runner import ModelRunner
from engine.step import SlotState
from tests.kit.paged import drive, permuted_tables
from tests.kit.reference import PROMPTS, solo_generate

BS = 4  # small blocks, so that every prompt spans several


def prompts_of(lm, n: int) -> list[list[int]]:
    return [lm.encode_prompt(p)[:9 + 3 * i] for i, p in enumerate(PROMPTS[:n])]


@pytest.mark.parametrize("path, fused, chunk, stagger", [("fast", False, None, False), ("eager", False, None, False),
                                                         ("fast", True, None, True), ("fast", False, 5, True)])
def test_permuted_tables_write_what_contiguous_tables_and_generate_write(tiny, path, fused, chunk, stagger):
    lm = replace(tiny, decode_step=path)
    prompts, new = prompts_of(lm, 3), 8
    per_row = -(-(max(map(len, prompts)) + new) // BS)
    runner = ModelRunner(lm, 3, 3 * per_row + 2, BS, fused=fused)
    contiguous = drive(runner, prompts, [list(range(i * per_row, (i + 1) * per_row)) for i in range(3)], new,
                       chunk, stagger)
    for seed in range(3):
        runner = ModelRunner(lm, 3, 3 * per_row + 2, BS, fused=fused)
        assert drive(runner, prompts, permuted_tables(3 * per_row + 2, 3, per_row, seed), new, chunk,
                     stagger) == contiguous
    assert contiguous == [solo_generate(lm, p, new) for p in prompts]


def test_tables_sharing_prompt_blocks_read_them_by_reference(tiny):
    """B's first two blocks are A's (the same 8 prompt tokens): B computes only its own tokens, from position 8, and
    still writes what generate() writes for its whole prompt; C shares A's partial third block through a
    copy-on-write copy, recomputes its last prompt token there, and A keeps its own tokens."""
    a = prompts_of(tiny, 3)[2]
    b, c = a[:8] + [17, 23, 5, 9], a[:11]
    runner = ModelRunner(tiny, 3, 30, BS)
    new = 6
    ta, tb, tc = [3, 11, 7, 0, 21, 15], [3, 11, 4, 28, 9], [3, 11, 20, 13, 26]
    requests = [Request(RequestSpec(id=i, prompt="", max_new_tokens=new), order=n) for n, i in enumerate("ABC")]
    out = {"A": [], "B": [], "C": []}
    first = runner.run([Row(0, requests[0], SlotState.PREFILL, a, 0, True, blocks=tuple(ta))]).tokens[0]
    out["A"].append(first)
    # B from position 8 (blocks 3, 11 shared), C from position 10 after copying A's block 7 (positions 8..11) to 20
    result = runner.run([Row(0, requests[0], SlotState.DECODE, [first], len(a), True, blocks=tuple(ta)),
                         Row(1, requests[1], SlotState.PREFILL, b[8:], 8, True, blocks=tuple(tb)),
                         Row(2, requests[2], SlotState.PREFILL, c[10:], 10, True, blocks=tuple(tc))],
                        copies=[(7, 20)])
    assert result.copy_ms > 0
    for key, slot in (("A", 0), ("B", 1), ("C", 2)):
        out[key].append(result.tokens[slot])
    lengths = {"A": len(a), "B": len(b), "C": len(c)}
    for _ in range(new - 2):
        rows = [Row(slot, requests[slot], SlotState.DECODE, out[key][-1:], lengths[key] + len(out[key]) - 1, True, blocks=tuple(t)) for slot, (key, t) in enumerate(zip("ABC", (ta, tb, tc)))]
        tokens = runner.run(rows).tokens
        for slot, key in enumerate("ABC"):
            out[key].append(tokens[slot])
    assert out["A"][:new - 1] == solo_generate(tiny, a, new - 1)
    assert out["B"][:new - 1] == solo_generate(tiny, b, new - 1)
    assert out["C"][:new - 1] == solo_generate(tiny, c, new - 1)


def test_swapped_out_and_in_twice_a_request_writes_what_generate_writes(tiny):
    """Mid-decode, A's blocks go to the host pool, its old device blocks are overwritten, and it comes back into
    other device blocks, later once more into reversed ones: its tokens are generate()'s."""
    a, b = prompts_of(tiny, 3)[2], prompts_of(tiny, 2)[1]
    new = 10
    runner = ModelRunner(tiny, 2, 24, BS, host_blocks=6)
    tables = [[0, 1, 2, 3, 4, 5], [12, 13, 14, 15, 16, 17]]
    ops = {4: {"swap_out": [(i, i) for i in range(6)], "skip": {0}},       # A's blocks out to host blocks 0..5
           5: {"copies": [(12 + i, i) for i in range(6)], "skip": {0}},   # its old device blocks overwritten
           6: {"swap_in": [(i, 6 + i) for i in range(6)], "tables": {0: list(range(6, 12))}},  # back, elsewhere
           8: {"swap_out": [(6 + i, i) for i in range(6)], "skip": {0}},
           9: {"swap_in": [(i, 23 - i) for i in range(6)], "tables": {0: [23 - i for i in range(6)]}}}
    out = drive(runner, [a, b], tables, new, stagger=True, ops=ops)
    assert out == [solo_generate(tiny, p, new) for p in (a, b)]


def test_the_pool_holds_exactly_its_blocks(tiny):
    cfg = tiny.model.config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    runner = ModelRunner(tiny, 2, 10, 16)
    expected = 10 * 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * 16 * head_dim * 4
    assert runner.kv_bytes == expected
    tensors = [runner.cache.pool] + [t for layer in runner.cache.layers for t in (layer.keys, layer.values)]
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    assert sum(storages.values()) == expected  # the layers' K/V are views of the one pool: no other K/V memory
    assert runner.cache.host is None
    assert ModelRunner(tiny, 2, 10, 16, host_blocks=3).cache.host.numel() * 4 == expected * 3 // 10


def test_swap_out_and_in_restore_blocks_bit_exactly_and_copy_duplicates_one(tiny):
    runner = ModelRunner(tiny, 2, 8, BS, host_blocks=4)
    cache = runner.cache
    cache.pool.copy_(torch.randn(cache.pool.shape))
    before = cache.pool.clone()
    assert cache.apply(swap_out=[(3, 0), (5, 2)]) > 0
    cache.pool[:, :, [3, 5]] = 0
    cache.apply(swap_in=[(2, 1), (0, 6)])
    assert torch.equal(cache.pool[:, :, 1], before[:, :, 5]) and torch.equal(cache.pool[:, :, 6], before[:, :, 3])
    cache.apply(copies=[(6, 7)])
    assert torch.equal(cache.pool[:, :, 7], before[:, :, 3])
    assert torch.equal(cache.pool[:, :, [0, 2, 4]], before[:, :, [0, 2, 4]])  # nothing else moved
    assert cache.apply() == 0.0
