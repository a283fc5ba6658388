"""The small operations between a decode layer's linears (engine/worker/cpu/layer_ops.cpp): each equals torch's
operations on the same tensors to float noise, writes only what it says it writes, and refuses what it cannot
take; and the runner's argmax (cpu_kernels.argmax) picks what torch.argmax picks, ties and NaNs included."""
import pytest
import torch
import torch.nn.functional as F

from engine.worker.cpu import kernels as cpu_kernels


@pytest.fixture(scope="module")
def ops():
    module = cpu_kernels.load()
    assert module is not None, cpu_kernels.why_not()
    return module


def rotate(x, cos, sin):  # transformers' rotate-half RoPE
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


@pytest.mark.parametrize("B, E", [(1, 576), (3, 64), (16, 100)])
def test_add_rms_norm_adds_in_place_then_norms_as_llama(ops, B, E):
    x, d, w = torch.randn(B, E), torch.randn(B, E), torch.randn(E)
    before = x.clone()
    got = ops.add_rms_norm(x, d, w, 1e-5)
    assert torch.equal(x, before + d)                                          # the residual, in place
    assert torch.allclose(got, F.rms_norm(before + d, (E,), w, 1e-5), rtol=1e-5, atol=1e-6)
    alone = ops.add_rms_norm(x, None, w, 1e-5)                                 # no residual: x untouched
    assert torch.equal(x, before + d) and torch.allclose(alone, got, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("B, H, KV, D", [(1, 9, 3, 64), (4, 4, 2, 16), (2, 6, 6, 8)])
def test_rope_write_rotates_q_and_k_and_writes_k_v_only_where_the_slot_says(ops, B, H, KV, D):
    qkv = torch.randn(B, (H + 2 * KV) * D)
    angles = torch.rand(B, D // 2) * 10
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
    pool = torch.zeros(3, 2, 5, 4, KV, D)                                       # (L, 2, N, bs, KV, D)
    keys, values = pool[1, 0], pool[1, 1]
    slots = torch.tensor([7, -1, 19, 0][:B]) if B > 1 else torch.tensor([13])
    q = ops.rope_write(qkv, cos, sin, keys, values, slots, H)
    heads = qkv.view(B, H + 2 * KV, D)
    assert torch.allclose(q, rotate(heads[:, :H], cos[:, None], sin[:, None]), rtol=1e-5, atol=1e-6)
    k = rotate(heads[:, H:H + KV], cos[:, None], sin[:, None])
    flat_k, flat_v = keys.reshape(-1, KV, D), values.reshape(-1, KV, D)
    for b, s in enumerate(slots.tolist()):
        if s >= 0:
            assert torch.allclose(flat_k[s], k[b], rtol=1e-5, atol=1e-6) and torch.equal(flat_v[s], heads[b, H + KV:])
    written = {s for s in slots.tolist() if s >= 0}
    untouched = [i for i in range(flat_k.shape[0]) if i not in written]
    assert not flat_k[untouched].any() and not flat_v[untouched].any()
    assert not pool[0].any() and not pool[2].any()                              # other layers untouched
    with pytest.raises(RuntimeError, match="outside the pool"):
        ops.rope_write(qkv[:1], cos[:1], sin[:1], keys, values, torch.tensor([20]), H)
    with pytest.raises(RuntimeError, match="qkv"):
        ops.rope_write(qkv[:, :-1].contiguous(), cos, sin, keys, values, slots, H)


def test_silu_mul_is_silu_gate_times_up_over_the_whole_range(ops):
    gu = torch.cat((torch.linspace(-100, 100, 4001), torch.randn(4001) * 3)).view(2, 4001)
    gu = torch.cat((gu, torch.randn(2, 4001)), 1).repeat(2, 1)[:3]              # (3, 2 I): gate | up
    I = gu.shape[1] // 2
    want = F.silu(gu[:, :I]) * gu[:, I:]
    assert torch.allclose(ops.silu_mul(gu), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="2 I"):
        ops.silu_mul(torch.randn(2, 5))


@pytest.mark.parametrize("V", [1, 9, 15, 16, 40, 49152, 49157])  # 9, 15, 40, 49157: rows start mid-vector
def test_argmax_picks_what_torch_picks_ties_and_nans_included(V):
    g = torch.Generator().manual_seed(V)
    logits = torch.randn(6, V, generator=g)
    if V > 20:
        logits[1, 3] = logits[1, V - 2] = 50.0                                 # a tie: the first index
        logits[2, 17] = float("nan")                                           # NaN counts as the largest
        logits[3, :] = -7.0                                                    # every value equal
        logits[4, V - 1] = 99.0                                                # the tail past the last 16
    assert torch.equal(cpu_kernels.argmax(logits), logits.argmax(-1))
    assert torch.equal(cpu_kernels.argmax(logits[:, ::2]), logits[:, ::2].argmax(-1))  # strided: copied first
    assert torch.equal(cpu_kernels.argmax(logits.double()), logits.double().argmax(-1))  # torch's own
