"""How the engine's process runs its compute threads: set by each entry point, before torch loads.

`python -m engine`, `python -m app` and the scripts that run the engine call `configure()` first thing; importing
the engine sets nothing (a library that changes its importer's environment surprises the importer).

What it does not know: torch itself (it must run before torch is imported, since OpenMP reads the variable when
it loads), or how many threads to use (torch's default: one per core).
"""
import os


def configure() -> None:
    """Idle OpenMP threads sleep instead of spinning, unless the caller's environment says otherwise. On a 2-core
    machine shared with a browser, a server and tests, spinning threads made a 70 ms decode step take seconds
    (measured here)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
