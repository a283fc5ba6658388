"""oneDNN-packed linear layers and the attention-mask helpers the runner and the fast decode step share.

On a float32 CPU, MKL's sgemm behind F.linear reads a linear's weights slowly for a few rows; oneDNN's packed
copies of the same weights compute the same layer faster (`packed_linears` swaps them in for a forward,
`packed_weight` makes and keeps one copy per weight). `additive_mask` turns a visibility table into the mask sdpa
takes.

What it does not know: rows, slots, requests or policies; which calls use it is the runner's decision.
"""
import contextlib
import functools
import math
import weakref

import torch


def additive_mask(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """0 where a key is visible to a query, -inf where not: built once per call (sdpa would convert a bool
    mask in every layer)."""
    return torch.zeros(visible.shape, dtype=dtype, device=visible.device).masked_fill_(~visible, -math.inf)


_PACKED: dict[int, tuple[weakref.ref, int, torch.Tensor]] = {}  # id(weight) -> (its ref, its version, packed)


def packed_weight(weight: torch.Tensor) -> torch.Tensor:
    """A oneDNN-packed copy of a linear layer's weight, made once and kept while the weight lives unchanged."""
    ref, version, packed = _PACKED.get(id(weight), (None, None, None))
    if ref is None or ref() is not weight or version != weight._version:
        packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach())
        _PACKED[id(weight)] = (weakref.ref(weight, lambda _, key=id(weight): _PACKED.pop(key, None)),
                               weight._version, packed)
    return packed


def packed_linear(module: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed_weight(module.weight), module.bias, "none", [], "")


def can_pack(model: torch.nn.Module, device: torch.device) -> bool:
    """Whether `packed_linears` applies: float32 on a CPU with oneDNN (the case measured; CUDA has no such gap)."""
    return device.type == "cpu" and torch.backends.mkldnn.is_available() and model.dtype == torch.float32


@contextlib.contextmanager
def packed_linears(model: torch.nn.Module):
    """While inside, every nn.Linear of `model` computes with its oneDNN-packed weight. On CPU, MKL's sgemm
    behind F.linear reads the weights slowly for a few rows: all of SmolLM2's decoder linears took
    67-80 ms for 2-16 rows (measured here, weights streamed from memory), the packed ones 37-41 ms; the
    49152 x 576 lm_head 26-58 ms for 2-8 rows, packed 7-12 ms. The packed copies cost memory once
    (as much as the weights); the model itself is left as it was, for generate() and everyone else."""
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear and "forward" not in m.__dict__]  # not hooked
    for m in linears:
        m.forward = functools.partial(packed_linear, m)
    try:
        yield
    finally:
        for m in linears:
            del m.forward
