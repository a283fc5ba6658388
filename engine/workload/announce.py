"""What a run announces beside its workload, so that no reader rebuilds what the engine resolved: every lane's
configuration with every option given its value (`lane_configs`), and the requests as the lanes run them, each
sibling of a request's `n` on its own (`requests`). The page draws from these and has no defaults of its own.

It knows workloads and lane specs, nothing of runs, records or the wire.
"""
from dataclasses import asdict

from engine.config import LaneSpec
from engine.workload.workload import Workload


def lane_config(lane: LaneSpec, workload: Workload) -> dict:
    """{name, policy, engine, options, config}: `options` what the lane itself says (a title names them), `config`
    every engine option as the lane runs it."""
    written = lane.to_dict(workload.config)
    options = {} if isinstance(written, str) else {k: v for k, v in written.items() if k not in ("name", "policy")}
    config = asdict(lane.config)
    return {"name": lane.name, "policy": lane.policy, "engine": lane.engine, "options": options, "config": config}


def request_dicts(workload: Workload) -> list[dict]:
    """Every request as the lanes run it: a sibling carries its `group`, `sample` (from 1) and `samples`."""
    sizes: dict[str, int] = {}
    for r in workload.requests:
        if r.group is not None:
            sizes[r.group] = sizes.get(r.group, 0) + 1
    seen: dict[str, int] = {}
    out = []
    for r in workload.requests:
        d = {"id": r.id, "prompt": r.prompt, "max_new_tokens": r.max_new_tokens, "ignore_eos": r.ignore_eos,
             **({"arrival_ms": r.arrival_ms} if workload.timed else {"arrival": r.arrival}), "priority": r.priority,
             **({"temperature": r.temperature} if r.temperature else {}), **({"seed": r.seed} if r.seed is not None else {})}
        if r.group is not None:
            seen[r.group] = seen.get(r.group, 0) + 1
            d.update(group=r.group, sample=seen[r.group], samples=sizes[r.group])
        out.append(d)
    return out


def announced(workload: Workload) -> dict:
    """`run_started`'s resolved part: {"lane_configs": {name: lane_config}, "requests": request_dicts}."""
    return {"lane_configs": {lane.name: lane_config(lane, workload) for lane in workload.lanes},
            "requests": request_dicts(workload)}
