"""Our compiled CPU kernels, one extension: `few_row_linear` (engine/kernels/gemv.cpp), a float32 linear for 1-6 rows
that streams the weights at close to the machine's read bandwidth, and `paged_decode_attention`
(engine/kernels/paged_attention.cpp), one-token attention that reads the paged pool's K/V blocks in place through
the block tables (no gather), both for the fast decode step.

It is built with torch's C++ extension tooling (g++ and ninja, from requirements.txt) once per machine, into the
user cache folder (`python -m engine.cpu_kernels`, which `make setup` runs; or on first use), and loaded from there
on every later start in well under a second. Anything that keeps it from building or loading (no compiler, a CPU
without AVX2, a read-only cache) leaves `kernel()` returning None with the reason in `why_not()`, and the decode step
uses oneDNN's packed linears and the gather + sdpa attention instead: same tokens, slower.

What it does not know: models, rows or slots; it multiplies matrices and attends over block tables.
"""
import contextlib
import hashlib
import os
import sys
from pathlib import Path

import torch

from .model import cache_root

SOURCES = [Path(__file__).resolve().parent / "kernels" / name for name in ("gemv.cpp", "paged_attention.cpp")]
HEADERS = [Path(__file__).resolve().parent / "kernels" / "pool.h"]  # the kernels' threads
MAX_ROWS = 6  # rows it computes (from 8 rows oneDNN's packed kernels are faster; measured here)

_state: dict = {}


def build_folder() -> Path:
    key = hashlib.sha1(b"".join(s.read_bytes() for s in SOURCES + HEADERS) + torch.__version__.encode()).hexdigest()[:12]
    return cache_root() / "kernels" / f"gemv-{key}"


def load(verbose: bool = False):
    """Build (if needed) and load the extension; the module, or None with the reason kept for `why_not()`."""
    if "module" in _state:
        return _state["module"]
    module, reason = None, None
    if os.environ.get("BATCH_LANES_NO_KERNEL"):
        reason = "turned off by BATCH_LANES_NO_KERNEL"
    elif torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        reason = f"the CPU has no AVX2 (torch reports {torch.backends.cpu.get_cpu_capability()})"
    else:
        try:
            from torch.utils.cpp_extension import load as load_extension

            folder = build_folder()
            folder.mkdir(parents=True, exist_ok=True)
            os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # venv's ninja
            module = load_extension("batch_lanes_gemv", [str(s) for s in SOURCES], build_directory=str(folder),
                                    extra_cflags=["-O3", "-mavx2", "-mfma"], verbose=verbose)
        except (OSError, RuntimeError, ImportError, SystemExit) as e:  # no compiler or ninja, a failed build
            reason = f"could not build {'/'.join(s.name for s in SOURCES)}: {str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__}"
    _state["module"], _state["why_not"] = module, reason
    return module


def kernel():
    """The loaded extension or None (never raises)."""
    return load()


def attention_usable(q: torch.Tensor, keys: torch.Tensor) -> bool:
    """Whether `paged_decode_attention(q, keys, ...)` applies: float32 on a CPU, q (B, H, D), a contiguous pool view."""
    return (q.device.type == "cpu" and q.dtype == torch.float32 and keys.dtype == torch.float32 and q.dim() == 3
            and keys.is_contiguous())


@contextlib.contextmanager
def kernels_alone():
    """Inside: torch's own operations run on the calling thread alone, while our kernels keep their threads
    (pool.h). A decode step of our kernels makes ~150 small torch calls between them (norms, RoPE, adds); under
    OMP_WAIT_POLICY=PASSIVE each one that goes parallel wakes a sleeping OpenMP thread, and a 1-row step took 33 ms
    instead of 20 (measured here). Steps are never computed two at once, so lowering the count here is safe."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def why_not() -> str | None:
    load()
    return _state["why_not"]


def usable(x: torch.Tensor, w: torch.Tensor) -> bool:
    """Whether `few_row_linear(x, w)` applies: float32 on a CPU, 1-6 rows, K a multiple of 32, w contiguous."""
    return (x.device.type == "cpu" and x.dtype == torch.float32 and w.dtype == torch.float32 and x.dim() == 2
            and 1 <= x.shape[0] <= MAX_ROWS and x.shape[1] % 32 == 0 and w.is_contiguous())


if __name__ == "__main__":  # `python -m engine.cpu_kernels`: build now (make setup), say where or why not
    built = load(verbose="-v" in sys.argv)
    print(f"few_row_linear, paged_decode_attention: built in {build_folder()}" if built else f"compiled kernels: not available: {why_not()}")
