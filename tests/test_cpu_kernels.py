"""The compiled few-row linear (engine/kernels/gemv.cpp through engine/cpu_kernels.py): built on this machine (make
setup builds it), equal to F.linear to float32 rounding, used by the fast decode step for 1-6 rows, safe to call
from several threads at once (its helper threads are engine/kernels/pool.h's), and a clean fallback to oneDNN when it
cannot be had."""
import threading

import pytest
import torch
import torch.nn.functional as F

from engine import cpu_kernels
from engine.fast_decode import FusedWeights


def test_the_kernel_builds_and_loads_here():
    assert cpu_kernels.kernel() is not None, cpu_kernels.why_not()
    assert cpu_kernels.why_not() is None


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("n, k", [(960, 576), (576, 1536), (49152, 576), (5, 32)])
def test_few_row_linear_equals_f_linear(rows, n, k):
    torch.manual_seed(rows)
    x, w = torch.randn(rows, k), torch.randn(n, k) * 0.05
    got = cpu_kernels.kernel().few_row_linear(x, w)
    want = F.linear(x, w)
    assert got.shape == want.shape and torch.allclose(got, want, rtol=1e-5, atol=1e-5)


def test_what_the_kernel_refuses_is_left_to_onednn():
    w = torch.randn(64, 64)
    assert cpu_kernels.usable(torch.randn(6, 64), w) and not cpu_kernels.usable(torch.randn(7, 64), w)
    assert not cpu_kernels.usable(torch.randn(1, 40), torch.randn(64, 40))            # K not a multiple of 32
    assert not cpu_kernels.usable(torch.randn(1, 64).bfloat16(), w.bfloat16())       # float32 only
    assert not cpu_kernels.usable(torch.randn(1, 64), w.t())                         # a transposed view
    with pytest.raises(RuntimeError, match="1-6 rows"):
        cpu_kernels.kernel().few_row_linear(torch.randn(7, 64), w)


def test_calls_from_several_threads_at_once_each_get_their_own_answer():
    # one thread's call holds the helper threads; another's meanwhile runs on its own thread: both right
    torch.manual_seed(0)
    ws = [torch.randn(3072, 576) * 0.05 for _ in range(4)]
    xs = [torch.randn(1 + i % 6, 576) for i in range(4)]
    wrong = []

    def calls(i):
        for _ in range(25):
            if not torch.allclose(kernel.few_row_linear(xs[i], ws[i]), F.linear(xs[i], ws[i]), rtol=1e-5, atol=1e-5):
                wrong.append(i)

    kernel = cpu_kernels.kernel()
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
    assert cpu_kernels.kernel() is None and "BATCH_LANES_NO_KERNEL" in cpu_kernels.why_not()
    weights = FusedWeights(tiny.model, packed=True)
    assert weights.kernel is None
    x = torch.randn(1, tiny.model.config.hidden_size)
    packed, plain = weights.layers[0][1]
    assert torch.allclose(weights.linear(x, (packed, plain)), F.linear(x, plain), atol=1e-5)
