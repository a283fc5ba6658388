"""Workloads: the JSON a user writes (a file for the CLI, a socket message for the page), checked at the edge.

    {"name": str, "slots": int, "lanes": [str], "requests": [{"id": str, "prompt": str, "max_new_tokens": int,
     "ignore_eos": bool, "arrival": int, "priority": int}], ...engine options}

Every check names the field and the limit; `Limits` holds every limit in one place. What needs the
tokenizer (prompt tokens, KV fit) is checked in `Engine.prepare`, against the same limits.
"""
import json
from dataclasses import dataclass, fields
from pathlib import Path

from .config import LANES, EngineConfig
from .request import RequestSpec


class WorkloadError(ValueError):
    """A workload that breaks a rule; `field` is a dotted path such as `requests[2].max_new_tokens`."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class Limits:
    max_requests: int = 32          # requests per workload
    max_slots: int = 16             # batch rows per lane
    max_lanes: int = 3              # lanes per run
    max_new_tokens: int = 256       # tokens one request may write
    max_prompt_chars: int = 4000    # characters of one prompt
    max_prompt_tokens: int = 1024   # chat-templated prompt tokens of one request
    max_arrival: int = 500          # latest arrival step
    max_id_chars: int = 32          # characters of a request id
    max_name_chars: int = 80        # characters of the workload name and description
    max_wait: int = 100             # dynamic lane's max_wait
    max_kv_budget: int = 65536      # KV tokens per lane (the kv_budget option)
    max_lane_kv_tokens: int = 8192  # KV a lane allocates: slots x (longest prompt + largest max_new_tokens)
    max_total_tokens: int = 12288   # prompt + new tokens of all requests together: bounds a run's compute


# A looser set for the CLI: the simulator previews big workloads, and a file on disk is trusted more.
CLI_LIMITS = Limits(max_requests=100_000, max_slots=256, max_new_tokens=100_000, max_prompt_chars=1_000_000,
                    max_prompt_tokens=100_000, max_arrival=10_000_000, max_id_chars=200, max_name_chars=500,
                    max_wait=100_000, max_kv_budget=100_000_000, max_lane_kv_tokens=100_000_000,
                    max_total_tokens=1_000_000_000)

REQUEST_KEYS = {"id", "prompt", "max_new_tokens", "ignore_eos", "arrival", "priority"}
OPTION_KEYS = {"max_wait", "policy", "chunk_size", "max_batch_tokens", "kv_budget", "kv_block_size", "fused"}
WORKLOAD_KEYS = {"name", "description", "slots", "lanes", "requests"} | OPTION_KEYS


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    config: EngineConfig
    requests: tuple[RequestSpec, ...]
    lanes: tuple[str, ...] = ("static", "continuous")  # the lanes a preset is meant to be watched on

    def to_dict(self) -> dict:
        d = {"name": self.name, "description": self.description, "slots": self.config.slots,
             "lanes": list(self.lanes)}
        defaults = EngineConfig()
        for f in fields(EngineConfig):
            if f.name in OPTION_KEYS and getattr(self.config, f.name) != getattr(defaults, f.name):
                d[f.name] = getattr(self.config, f.name)
        d["requests"] = [{"id": r.id, "prompt": r.prompt, "max_new_tokens": r.max_new_tokens,
                          "ignore_eos": r.ignore_eos, "arrival": r.arrival, "priority": r.priority}
                         for r in self.requests]
        return d


def _int(value, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WorkloadError(field, f"must be an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise WorkloadError(field, f"must be from {lo} to {hi}, got {value}")
    return value


def _str(value, field: str, max_chars: int, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise WorkloadError(field, f"must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise WorkloadError(field, "must not be empty")
    if len(value) > max_chars:
        raise WorkloadError(field, f"is {len(value)} characters, the limit is {max_chars}")
    if "\x00" in value:
        raise WorkloadError(field, "must not contain NUL characters")
    return value


def _unknown(obj: dict, allowed: set[str], where: str) -> None:
    extra = sorted(str(k) for k in obj if k not in allowed)
    if extra:
        raise WorkloadError(f"{where}{extra[0]}", f"unknown key (allowed: {', '.join(sorted(allowed))})")


def check_lanes(lanes, limits: Limits) -> list[str]:
    """A list of 1 to `max_lanes` distinct lane names, or a WorkloadError on field `lanes`."""
    if (not isinstance(lanes, list) or not 1 <= len(lanes) <= limits.max_lanes
            or any(not isinstance(lane, str) or lane not in LANES for lane in lanes) or len(set(lanes)) != len(lanes)):
        raise WorkloadError("lanes", f"must be a list of 1 to {limits.max_lanes} distinct names from {', '.join(LANES)}")
    return list(lanes)


def parse_workload(obj, limits: Limits = Limits(), slots: int | None = None, **overrides) -> Workload:
    """Check a workload object against `limits`; `slots` and `overrides` (engine options) replace its own."""
    if not isinstance(obj, dict):
        raise WorkloadError("workload", f"must be an object, got {type(obj).__name__}")
    _unknown(obj, WORKLOAD_KEYS, "")
    name = _str(obj.get("name", "untitled"), "name", limits.max_name_chars)
    description = _str(obj.get("description", ""), "description", limits.max_name_chars * 4, allow_empty=True)
    slots = _int(obj.get("slots", 4) if slots is None else slots, "slots", 1, limits.max_slots)
    lanes = check_lanes(obj.get("lanes", ["static", "continuous"]), limits)
    options = {k: obj[k] for k in OPTION_KEYS if k in obj}
    options.update({k: v for k, v in overrides.items() if v is not None})
    for key in ("chunk_size", "max_batch_tokens", "kv_budget", "kv_block_size"):
        if options.get(key) is not None:
            _int(options[key], key, 1, limits.max_kv_budget)
    if "max_wait" in options:
        _int(options["max_wait"], "max_wait", 0, limits.max_wait)
    if "fused" in options and not isinstance(options["fused"], bool):
        raise WorkloadError("fused", "must be true or false")
    try:
        config = EngineConfig(slots=slots, **options)
    except (ValueError, TypeError) as e:
        field = next((k for k in options if k in str(e)), "workload")
        raise WorkloadError(field, str(e)) from None
    raw = obj.get("requests")
    if not isinstance(raw, list):
        raise WorkloadError("requests", "must be a list of request objects")
    if not 1 <= len(raw) <= limits.max_requests:
        raise WorkloadError("requests", f"must hold 1 to {limits.max_requests} requests, got {len(raw)}")
    specs, seen = [], set()
    for i, r in enumerate(raw):
        where = f"requests[{i}]"
        if not isinstance(r, dict):
            raise WorkloadError(where, f"must be an object, got {type(r).__name__}")
        _unknown(r, REQUEST_KEYS, f"{where}.")
        for key in ("id", "prompt", "max_new_tokens"):
            if key not in r:
                raise WorkloadError(f"{where}.{key}", "is required")
        rid = _str(r["id"], f"{where}.id", limits.max_id_chars)
        if rid in seen:
            raise WorkloadError(f"{where}.id", f"duplicate id {rid!r}")
        seen.add(rid)
        ignore_eos = r.get("ignore_eos", True)
        if not isinstance(ignore_eos, bool):
            raise WorkloadError(f"{where}.ignore_eos", "must be true or false")
        specs.append(RequestSpec(
            id=rid,
            prompt=_str(r["prompt"], f"{where}.prompt", limits.max_prompt_chars),
            max_new_tokens=_int(r["max_new_tokens"], f"{where}.max_new_tokens", 1, limits.max_new_tokens),
            ignore_eos=ignore_eos,
            arrival=_int(r.get("arrival", 0), f"{where}.arrival", 0, limits.max_arrival),
            priority=_int(r.get("priority", 0), f"{where}.priority", -1000, 1000),
        ))
    return Workload(name, description, config, tuple(specs), tuple(lanes))


def load_workload(path: str | Path, limits: Limits = CLI_LIMITS, **overrides) -> Workload:
    try:
        obj = json.loads(Path(path).read_text())
    except OSError as e:
        raise WorkloadError("workload", f"cannot read {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise WorkloadError("workload", f"{path} is not valid JSON: {e}") from None
    return parse_workload(obj, limits, **overrides)
