"""Our compiled CPU kernels, one extension: `few_row_linear` (engine/worker/cpu/gemv.cpp), a float32 linear for 1-16
rows over weights repacked once into panels (`pack_panels`), which streams them at close to the machine's read
bandwidth and multiply-adds at close to the cores' rate, `paged_decode_attention`
(engine/worker/cpu/paged_attention.cpp), one-token attention that reads the paged pool's K/V blocks in place through
the block tables (no gather), and the small operations between a layer's linears (engine/worker/cpu/layer_ops.cpp:
residual add + RMS norm, RoPE + K/V write, SiLU * up, and the runner's argmax), all for the fast decode step.

It is built with torch's C++ extension tooling (g++ and ninja, from requirements.txt) once per machine, into the
user cache folder (`python -m engine.worker.cpu.kernels`, which `make setup` runs; or on first use), and loaded from there
on every later start in well under a second. Anything that keeps it from building or loading (no compiler, a CPU
without AVX2, a read-only cache) leaves `load()` returning None with the reason in `why_not()`, and the decode step
uses oneDNN's packed linears and the gather + sdpa attention instead: same tokens, slower.

What it does not know: models, rows or slots; it multiplies matrices and attends over block tables.
"""
import contextlib
import hashlib
import os
import sys
import time
from pathlib import Path

import torch

from engine.worker.model import cache_root

SOURCES = [Path(__file__).resolve().parent / name for name in ("gemv.cpp", "paged_attention.cpp",
                                                                                "layer_ops.cpp")]
HEADERS = [Path(__file__).resolve().parent / name for name in ("pool.h", "vec.h")]  # threads, vectors
MAX_ROWS = 16  # rows few_row_linear computes (gemv.cpp's MAX_ROWS): the live lane's 16 slots
PANEL = 32  # output columns per panel (gemv.cpp's PANEL): a linear whose output size is not a multiple is oneDNN's

_state: dict = {}


def flags() -> list[str]:
    """The compiler's flags: AVX-512 where torch finds it on this CPU (gemv.cpp then does 8 rows at once), else AVX2."""
    wide = ["-mavx512f"] if torch.backends.cpu.get_cpu_capability() == "AVX512" else []
    return ["-O3", "-mavx2", "-mfma", *wide, "-ffp-contract=fast"]


def build_folder() -> Path:
    """One folder per sources, torch, flags and checkout: torch's build file names the sources by their absolute
    paths, so two checkouts sharing a folder rebuilt it in turn (~30 s, minutes under load) at every load."""
    key = hashlib.sha1(b"".join(s.read_bytes() for s in SOURCES + HEADERS) + torch.__version__.encode()
                       + " ".join(flags()).encode() + str(SOURCES[0].resolve().parent).encode()).hexdigest()[:12]
    return cache_root() / "kernels" / f"gemv-{key}"


STALE_LOCK_S = 600  # a build takes ~30 s: a lock this old was left by a build that was killed


def drop_stale_lock(folder: Path) -> None:
    """torch's build lock (`lock` in the build folder) outlives a build that was killed (Ctrl-C during `make setup`),
    and every later load would wait for it forever: one older than any build is removed."""
    lock = folder / "lock"
    try:
        if time.time() - lock.stat().st_mtime > STALE_LOCK_S:
            lock.unlink()
    except FileNotFoundError:
        pass


def load(verbose: bool = False):
    """Build (if needed) and load the extension; the module, or None with the reason kept for `why_not()` (never
    raises)."""
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
            drop_stale_lock(folder)
            os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # venv's ninja
            module = load_extension("batch_lanes_gemv", [str(s) for s in SOURCES], build_directory=str(folder),
                                    extra_cflags=flags(), verbose=verbose)
        except (OSError, RuntimeError, ImportError, SystemExit) as e:  # no compiler or ninja, a failed build
            reason = f"could not build {'/'.join(s.name for s in SOURCES)}: {str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__}"
    _state["module"], _state["why_not"] = module, reason
    return module


@contextlib.contextmanager
def kernels_alone():
    """Inside: torch's own operations run on the calling thread alone, while our kernels keep their threads
    (pool.h). A decode step of our kernels still makes a few torch calls (the embedding, RoPE's angles, slicing;
    ~150 before layer_ops.cpp took the norms, RoPE and adds); under OMP_WAIT_POLICY=PASSIVE each one that goes
    parallel wakes a sleeping OpenMP thread, and a 1-row step took 33 ms instead of 20 (measured then). Steps are
    never computed two at once, so lowering the count here is safe."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def argmax(logits: torch.Tensor) -> torch.Tensor:
    """Each row's argmax of `logits` (B, V), as torch.argmax(-1) gives it (ties to the first index, NaN the
    largest): layer_ops.cpp's argmax_rows for float32 on a CPU where the extension is loaded (~10x faster here)."""
    module = load() if logits.device.type == "cpu" and logits.dtype == torch.float32 and logits.dim() == 2 else None
    return logits.argmax(-1) if module is None else module.argmax_rows(logits.contiguous())


def why_not() -> str | None:
    load()
    return _state["why_not"]


def panels(w: torch.Tensor) -> torch.Tensor | None:
    """`w` (N, K) repacked for `few_row_linear`, or None where the kernel is not loaded or cannot take it (not a
    float32 CPU weight, N not a multiple of PANEL)."""
    module = load()
    if module is None or w.device.type != "cpu" or w.dtype != torch.float32 or w.dim() != 2 or w.shape[0] % PANEL:
        return None
    return module.pack_panels(w.detach())


def usable(x: torch.Tensor, panels: torch.Tensor | None) -> bool:
    """Whether `few_row_linear(x, panels)` applies: panels from `panels()`, float32 x on a CPU with 1-16 rows."""
    return (panels is not None and panels.dim() == 3 and panels.shape[2] == PANEL and x.device.type == "cpu"
            and x.dtype == torch.float32 and x.dim() == 2 and 1 <= x.shape[0] <= MAX_ROWS
            and x.shape[1] == panels.shape[1])


if __name__ == "__main__":  # `python -m engine.worker.cpu.kernels`: build now (make setup), say where or why not
    built = load(verbose="-v" in sys.argv)
    print(f"compiled kernels: built in {build_folder()}" if built else f"compiled kernels: not available: {why_not()}")
