"""Where a split lane ran: its processes, the cores and memory domains they shared, the device, what carried the
data between them, and whether more busy threads than cores were asked for (issue 36 item 4, issue 37 item 4).

`placement(processes, transport, device)` is the one builder of a lane's `placement` (the same shape for a
tensor-parallel, pipeline-parallel or P/D lane): it reads the cores this process may run on and the machine's NUMA
nodes itself, and writes `says`, the one line the page draws under the lane's title. It knows nothing of lanes,
steps or models: the caller names each process's role, pid and threads.
"""
import os
from pathlib import Path

NODES = Path("/sys/devices/system/node")   # one nodeN folder per NUMA node (absent: one memory domain)


def cores() -> int:
    """Cores this process may run on (its affinity: a container's limit, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity (macOS)
        return os.cpu_count() or 1


def memory_domains(nodes: Path = NODES) -> int:
    """NUMA nodes of this machine: memory each set of cores reaches at its own bandwidth (1 when none are listed)."""
    try:
        return max(1, sum(1 for p in nodes.iterdir() if p.name.startswith("node") and p.name[4:].isdigit()))
    except OSError:
        return 1


def noun(roles: list[str]) -> str:
    """What the busy processes are, for `says`: "rank" for TP ranks, "stage" for PP stages, else none."""
    for prefix, word in (("tp rank", "rank"), ("pp stage", "stage")):
        if roles and all(r.startswith(prefix) for r in roles):
            return word + " "
    return ""


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def placement(processes: list[dict], transport: str, device: str = "cpu") -> dict:
    """A split lane's `placement`: `processes` is [{"role", "pid", "threads"}] ("tp rank 0", "pp stage 1", "prefill",
    "decode", "driver"); the driver waits while the others compute, so it is listed but not counted as busy. Roles
    that share a pid are engines of one process stepping in turn: its threads are counted once."""
    n_cores, domains = cores(), memory_domains()
    busy = [p for p in processes if p["role"] != "driver"]
    per_pid = {}   # each busy process's threads, in order
    for p in busy:
        per_pid[p["pid"]] = max(per_pid.get(p["pid"], 0), p["threads"])
    threads = list(per_pid.values())
    oversubscribed = device == "cpu" and sum(threads) > n_cores   # a GPU lane's threads only launch kernels
    each = plural(threads[0], "thread") if len(set(threads)) == 1 else f"{min(threads)}-{max(threads)} threads"
    where = f"on {plural(n_cores, 'core')}" if device == "cpu" else f"on {device}"
    memory = "one memory domain" if domains == 1 else f"{domains} memory domains"
    if len(per_pid) == 1 and len(busy) > 1:
        who = f"{len(busy)} engines in one process of {each}, computing in turn,"
    else:
        who = f"{len(busy)} {noun([p['role'] for p in busy])}processes of {each}"
    says = f"{who} {where}, {memory}: " + ("oversubscribed" if oversubscribed else "not oversubscribed")
    return {"processes": [dict(p) for p in processes], "cores": n_cores, "memory_domains": domains,
            "device": device, "transport": transport, "oversubscribed": oversubscribed, "says": says}
