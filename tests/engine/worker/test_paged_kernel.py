"""The compiled paged-attention decode kernel (engine/worker/cpu/paged_attention.cpp): reading K/V blocks in place
through the tables gives what the gather + sdpa path gives (within 1e-5), on random pools with permuted, shared
and ragged tables, and on a packed prompt's tokens as rows of their own; and it refuses, by name, what it cannot
read."""
import random

import pytest
import torch
import torch.nn.functional as F

from engine.worker.cpu import kernels as cpu_kernels


def reference(q, keys, values, tables, lens, scale):
    """The gather + sdpa path: each row's blocks gathered, positions past lens[b] masked, query heads grouped."""
    B, H, D = q.shape
    _, bs, KV, _ = keys.shape
    out = torch.empty_like(q)
    for b in range(B):
        n = int(lens[b])
        idx = tables[b, :-(-n // bs)]
        k = keys[idx].reshape(-1, KV, D)[:n].transpose(0, 1)                   # (KV, n, D)
        v = values[idx].reshape(-1, KV, D)[:n].transpose(0, 1)
        qb = q[b].reshape(KV, H // KV, D)
        out[b] = F.scaled_dot_product_attention(qb, k, v, scale=scale).reshape(H, D)
    return out


def random_case(seed: int, B: int, H: int, KV: int, D: int, bs: int, blocks: int, shared: bool):
    g = torch.Generator().manual_seed(seed)
    keys, values = torch.randn(blocks, bs, KV, D, generator=g), torch.randn(blocks, bs, KV, D, generator=g)
    q = torch.randn(B, H, D, generator=g)
    rng = random.Random(seed)
    lens = [rng.randint(1, (blocks // B) * bs) for _ in range(B)]
    ids = list(range(blocks))
    rng.shuffle(ids)
    width = max(-(-n // bs) for n in lens)
    per = blocks // B
    tables = [ids[b * per:(b + 1) * per] for b in range(B)]
    if shared:  # every row heads its table with row 0's first block (a shared prefix)
        tables = [[tables[0][0]] + t[1:] for t in tables]
    tables = torch.tensor([t[:width] + [0] * (width - len(t[:width])) for t in tables])
    return q, keys, values, tables, torch.tensor(lens)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("B, H, KV, D, bs", [(1, 9, 3, 64, 16), (4, 4, 2, 8, 4), (5, 6, 6, 12, 2), (3, 8, 1, 16, 3)])
@pytest.mark.parametrize("shared", [False, True])
def test_kernel_equals_gather_and_sdpa_on_permuted_ragged_tables(seed, B, H, KV, D, bs, shared):
    q, keys, values, tables, lens = random_case(seed, B, H, KV, D, bs, blocks=B * 6, shared=shared)
    scale = D ** -0.5
    got = cpu_kernels.load().paged_decode_attention(q, keys, values, tables, lens, scale)
    assert torch.allclose(got, reference(q, keys, values, tables, lens, scale), rtol=1e-5, atol=1e-5)


def test_kernel_reads_a_layer_view_of_the_pool_and_large_scores_stay_finite():
    pool = torch.randn(2, 2, 8, 4, 2, 8) * 30                                  # (L, 2, N, bs, KV, D): big logits
    keys, values = pool[1, 0], pool[1, 1]
    q = torch.randn(2, 4, 8) * 30
    tables, lens = torch.tensor([[7, 2, 5], [3, 3, 0]]), torch.tensor([11, 5])
    got = cpu_kernels.load().paged_decode_attention(q, keys, values, tables, lens, 8 ** -0.5)
    assert torch.isfinite(got).all()
    assert torch.allclose(got, reference(q, keys, values, tables, lens, 8 ** -0.5), rtol=1e-5, atol=1e-4)


def test_the_attention_kernel_refuses_what_it_cannot_read():
    keys, kernel = torch.randn(4, 2, 1, 8), cpu_kernels.load()
    tables, lens = torch.tensor([[1]]), torch.tensor([2])
    with pytest.raises(RuntimeError, match="float32 only"):
        kernel.paged_decode_attention(torch.randn(1, 2, 8).double(), keys.double(), keys.double(), tables, lens, 1.0)
    with pytest.raises(RuntimeError, match=r"q \(B, H, D\)"):                   # more than one token a row
        kernel.paged_decode_attention(torch.randn(1, 1, 2, 8), keys, keys, tables, lens, 1.0)
    with pytest.raises(RuntimeError, match="contiguous"):
        kernel.paged_decode_attention(torch.randn(1, 2, 8), keys.transpose(0, 1), keys.transpose(0, 1), tables,
                                      lens, 1.0)
    with pytest.raises(RuntimeError, match="fit in the row's table"):
        kernel.paged_decode_attention(torch.randn(1, 2, 8), keys, keys, tables, torch.tensor([3]), 1.0)
    with pytest.raises(RuntimeError, match="outside the pool"):
        cpu_kernels.load().paged_decode_attention(torch.randn(1, 2, 8), keys, keys, torch.tensor([[9]]),
                                                    torch.tensor([2]), 1.0)


def test_a_packed_prompt_as_rows_of_its_own_is_causal_attention():
    """A fused step passes each prompt token as a row (its request's table, length its position + 1), after every
    token's K/V is written: that is causal attention over the prompt behind its cached prefix, here beside a
    decoder of another request, with the rows interleaved."""
    g = torch.Generator().manual_seed(3)
    H, KV, D, bs = 6, 2, 16, 4
    keys, values = torch.randn(12, bs, KV, D, generator=g), torch.randn(12, bs, KV, D, generator=g)
    prompt, decoder = [9, 4, 7, 1, 11], [2, 0, 5]      # block tables: a prompt at positions 5..17, a decoder at 9
    start, n = 5, 13
    rows = [(prompt, p) for p in range(start, start + n)]
    rows.insert(4, (decoder, 9))
    q = torch.randn(len(rows), H, D, generator=g)
    width = max(len(prompt), len(decoder))
    tables = torch.tensor([t + [t[0]] * (width - len(t)) for t, _ in rows])
    lens = torch.tensor([p + 1 for _, p in rows])
    got = cpu_kernels.load().paged_decode_attention(q, keys, values, tables, lens, D ** -0.5)
    k = keys[prompt].reshape(-1, KV, D)[:start + n].transpose(0, 1)          # (KV, 18, D)
    v = values[prompt].reshape(-1, KV, D)[:start + n].transpose(0, 1)
    mine = [i for i, (t, _) in enumerate(rows) if t is prompt]
    qp = q[mine].reshape(n, KV, H // KV, D).permute(1, 2, 0, 3)               # (KV, G, n, D)
    causal = torch.arange(start + n)[None] <= torch.arange(start, start + n)[:, None]  # (n, 18)
    want = F.scaled_dot_product_attention(qp, k[:, None], v[:, None], attn_mask=causal, scale=D ** -0.5)
    assert torch.allclose(got[mine], want.permute(2, 0, 1, 3).reshape(n, H, D), rtol=1e-5, atol=1e-5)
    assert torch.allclose(got[4:5], reference(q[4:5], keys, values, tables[4:5], lens[4:5], D ** -0.5), atol=1e-5)
