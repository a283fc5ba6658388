"""The compiled few-row linear (engine/worker/cpu/gemv.cpp through engine/worker/cpu/kernels.py): built on this machine (make
setup builds it), equal to F.linear to float32 rounding, used by the fast decode step for 1-16 rows, safe to call
from several threads at once (its helper threads are engine/worker/cpu/pool.h's), and a clean fallback to oneDNN when it
cannot be had."""
import functools
import threading

import pytest
import torch
import torch.nn.functional as F

from engine.worker.cpu import kernels as cpu_kernels
from engine.worker.fast_decode import FusedWeights


def test_the_kernel_builds_and_loads_here():
    assert cpu_kernels.load() is not None, cpu_kernels.why_not()
    assert cpu_kernels.why_not() is None


@functools.cache
def weight(n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A random (n, k) weight and its panels, made once for every row count (the lm_head's is 113 MB)."""
    gen = torch.Generator().manual_seed(n * k)
    w = torch.randn(n, k, generator=gen) * 0.05
    return w, cpu_kernels.panels(w)


@pytest.mark.parametrize("rows", list(range(1, 17)))
@pytest.mark.parametrize("n, k", [(960, 576), (576, 1536), (49152, 576), (32, 5)])
def test_few_row_linear_equals_f_linear(rows, n, k):
    # every row count from 1 to 16: 1-8 are one pass over a panel, 9-16 two passes of near-equal parts (AVX-512)
    torch.manual_seed(rows)
    x, (w, panels) = torch.randn(rows, k), weight(n, k)
    got = cpu_kernels.load().few_row_linear(x, panels)
    want = F.linear(x, w)
    assert got.shape == want.shape and torch.allclose(got, want, rtol=1e-5, atol=1e-5)


def test_the_panels_hold_each_weight_at_panel_k_column():
    w = torch.arange(64 * 3, dtype=torch.float32).view(64, 3)
    p = cpu_kernels.panels(w)
    assert p.shape == (2, 3, 32) and p[1, 2, 5].item() == w[32 + 5, 2].item() and p.is_contiguous()


def test_what_the_kernel_refuses_is_left_to_onednn():
    w = cpu_kernels.panels(torch.randn(64, 64))
    assert cpu_kernels.usable(torch.randn(16, 64), w) and not cpu_kernels.usable(torch.randn(17, 64), w)
    assert cpu_kernels.panels(torch.randn(40, 64)) is None                            # N not a multiple of 32
    assert cpu_kernels.panels(torch.randn(64, 64).bfloat16()) is None                 # float32 only
    assert not cpu_kernels.usable(torch.randn(1, 64).bfloat16(), w)
    assert not cpu_kernels.usable(torch.randn(1, 48), w)                              # K does not match
    assert not cpu_kernels.usable(torch.randn(1, 64), None)
    assert not cpu_kernels.usable(torch.randn(1, 64), torch.randn(64, 64))          # a plain weight, not panels
    with pytest.raises(RuntimeError, match="1-16 rows"):
        cpu_kernels.load().few_row_linear(torch.randn(17, 64), w)
    with pytest.raises(RuntimeError, match="multiple of 32"):
        cpu_kernels.load().pack_panels(torch.randn(40, 64))


def test_calls_from_several_threads_at_once_each_get_their_own_answer():
    # one thread's call holds the helper threads; another's meanwhile runs on its own thread: both right
    torch.manual_seed(0)
    ws = [torch.randn(3072, 576) * 0.05 for _ in range(4)]
    ps = [cpu_kernels.panels(w) for w in ws]
    xs = [torch.randn(1 + 5 * i, 576) for i in range(4)]
    wrong = []

    def calls(i):
        for _ in range(25):
            if not torch.allclose(kernel.few_row_linear(xs[i], ps[i]), F.linear(xs[i], ws[i]), rtol=1e-5, atol=1e-5):
                wrong.append(i)

    kernel = cpu_kernels.load()
    threads = [threading.Thread(target=calls, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads) and not wrong


def test_kernels_alone_lowers_torch_threads_inside_and_restores_them_after_a_raise():
    before = torch.get_num_threads()
    with pytest.raises(ValueError):
        with cpu_kernels.kernels_alone():
            assert torch.get_num_threads() == 1
            raise ValueError
    assert torch.get_num_threads() == before


def test_without_the_kernel_the_fast_step_uses_onednn_and_says_why(tiny, monkeypatch):
    monkeypatch.setattr(cpu_kernels, "_state", {})
    monkeypatch.setenv("BATCH_LANES_NO_KERNEL", "1")
    assert cpu_kernels.load() is None and "BATCH_LANES_NO_KERNEL" in cpu_kernels.why_not()
    weights = FusedWeights(tiny.model, packed=True)
    assert weights.kernel is None and not weights.all_panels
    x = torch.randn(1, tiny.model.config.hidden_size)
    packed, panels, _ = weights.layers[0][2]                                          # o_proj
    assert panels is None
    want = F.linear(x, tiny.model.model.layers[0].self_attn.o_proj.weight)
    assert torch.allclose(weights.linear(x, (packed, panels, None)), want, atol=1e-5)


def test_a_build_lock_left_by_a_killed_build_is_dropped_and_a_live_one_kept(tmp_path):
    import os
    import time

    lock = tmp_path / "lock"
    lock.touch()
    cpu_kernels.drop_stale_lock(tmp_path)
    assert lock.exists()                                  # a build may be running now: wait for it
    old = time.time() - cpu_kernels.STALE_LOCK_S - 1
    os.utime(lock, (old, old))
    cpu_kernels.drop_stale_lock(tmp_path)
    assert not lock.exists()                              # no build takes this long: it was killed
    cpu_kernels.drop_stale_lock(tmp_path)                 # no lock at all: nothing to do
