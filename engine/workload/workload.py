"""Workloads: the JSON a user writes (a file for the CLI, a socket message for the page), checked at the edge.

    {"name": str, "description": str, "slots": int, ...engine options (every lane's defaults),
     "lanes": ["static", {"name": "chunked 64", "policy": "continuous", "chunk_size": 64}, ...],
     "requests": [{"id": str, "prompt": str, "max_new_tokens": int, "ignore_eos": bool,
                   "arrival": int (steps) | "arrival_ms": float, "priority": int,
                   "n": int (samples, engine.workload.siblings), "temperature": float, "seed": int}]
     | "generate": {...an arrival process, see arrivals.py},
     "slo": {"ttft_ms": float, "tpot_ms": float} (the targets its requests are held to, engine.workload.slo)}

A lane is a bare policy name or a named configuration: a policy and its own options. Arrivals count
either steps (`arrival`) or milliseconds on each lane's clock (`arrival_ms`), one or the other in a
workload. Every check names the field and the limit (`limits.Limits`); what needs the tokenizer
(prompt tokens, KV fit) is checked in `Engine.prepare`, against the same limits. It does not know the
tokenizer, the model or how a lane runs; no torch.
"""
import json
from dataclasses import dataclass, fields, replace
from pathlib import Path

from engine.admission import ORDERS
from engine.workload.arrivals import generate_requests
from engine.config import EngineConfig, LaneSpec
from engine.workload.disaggregation import disaggregation_option
from engine.workload.fleet import FLEET_KEYS, fleet_option
from engine.workload.pipeline_parallel import pipeline_parallel_check
from engine.workload.tensor_parallel import tensor_parallel_check
from engine.limits import CLI_LIMITS, Limits, WorkloadError, check_int, check_number, check_str, reject_unknown
from engine.sched.policies import TRAITS, options_only_for
from engine.spec import RequestSpec
from engine.workload.siblings import collapse, expand
from engine.workload.slo import SLO, parse_slo
from engine.config import SpeculativeConfig
from engine.workload.trace import expand_trace
from engine.peers.vllm_options import ENGINES, PARALLEL, check_vllm_lane

__all__ = ["Workload", "parse_workload", "parse_lanes", "load_workload", "Limits", "CLI_LIMITS", "WorkloadError"]

REQUEST_KEYS = {"id", "prompt", "max_new_tokens", "ignore_eos", "arrival", "arrival_ms", "priority", "n", "temperature",
                "seed", "session"}
INT64 = (-2 ** 63, 2 ** 63 - 1)
OPTION_KEYS = {f.name for f in fields(EngineConfig)} - {"slots"}
LANE_KEYS = {"name", "policy", "slots", "engine", "disaggregation"} | OPTION_KEYS | FLEET_KEYS | set(PARALLEL)
# "claims": a preset's lesson claims, for the page to check against the run (static/js/lanes/claims.js); the engine ignores them
WORKLOAD_KEYS = {"name", "description", "claims", "clock", "slots", "lanes", "requests", "generate", "policy", "trace",
                 "slo"} | OPTION_KEYS
CLOCKS = ("ms", "steps")  # the clocks a page can show a run on
DEFAULT_LANES = ("static", "continuous")


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    config: EngineConfig                # the workload's options: the defaults of every lane
    requests: tuple[RequestSpec, ...]
    lanes: tuple[LaneSpec, ...] = ()    # the lanes it runs on (a preset's comparison), in the order given
    clock: str | None = None            # the clock its lesson speaks in, which a page opens it on ("ms" | "steps");
                                        # None: the page's choice. The engine runs both clocks alike.
    slo: SLO | None = None              # the TTFT and TPOT targets its requests are held to (None: none set)

    def __post_init__(self):
        if not self.lanes:
            object.__setattr__(self, "lanes", tuple(LaneSpec.plain(p, self.config) for p in DEFAULT_LANES))

    @property
    def timed(self) -> bool:
        """Whether arrivals are in milliseconds (`arrival_ms`) rather than steps."""
        return any(r.arrival_ms is not None for r in self.requests)

    @property
    def lane_names(self) -> list[str]:
        return [lane.name for lane in self.lanes]

    def to_dict(self) -> dict:
        d = {"name": self.name, "description": self.description, "slots": self.config.slots,
             "lanes": [lane.to_dict(self.config) for lane in self.lanes]}
        if self.clock is not None:
            d["clock"] = self.clock
        if self.slo is not None:
            d["slo"] = self.slo.to_dict()
        d.update({k: v for k, v in self.config.changes(EngineConfig()).items() if k != "slots"})
        d["requests"] = [{"id": r.id, "prompt": r.prompt, "max_new_tokens": r.max_new_tokens,
                          "ignore_eos": r.ignore_eos,
                          **({"arrival_ms": r.arrival_ms} if self.timed else {"arrival": r.arrival}),
                          "priority": r.priority, **({"n": n} if n > 1 else {}),
                          **({"temperature": r.temperature} if r.temperature else {}),
                          **({"seed": r.seed} if r.seed is not None else {}),
                          **({"session": r.session} if r.session is not None else {})}
                         for r, n in collapse(self.requests)]
        return d


def _options(obj: dict, where: str, limits: Limits, timed: bool) -> dict:
    """The engine options `obj` sets, type- and range-checked (`where` prefixes the field names)."""
    options = {k: obj[k] for k in OPTION_KEYS if k in obj}
    for key in ("chunk_size", "max_batch_tokens", "kv_budget", "kv_block_size"):
        if options.get(key) is not None:
            check_int(options[key], f"{where}{key}", 1, limits.max_kv_budget)
    if "max_wait" in options:
        if timed:
            raise WorkloadError(f"{where}max_wait", "counts steps, but this workload's arrivals are in ms: "
                                                    "use max_wait_ms")
        check_int(options["max_wait"], f"{where}max_wait", 0, limits.max_wait)
    if "max_wait_ms" in options:
        if not timed:
            raise WorkloadError(f"{where}max_wait_ms", "counts milliseconds, but this workload's arrivals are in "
                                                       "steps: use max_wait, or give the requests arrival_ms")
        check_number(options["max_wait_ms"], f"{where}max_wait_ms", 0, limits.max_arrival_ms)
    for key in ("fused", "prefix_cache"):
        if key in options and not isinstance(options[key], bool):
            raise WorkloadError(f"{where}{key}", "must be true or false")
    if options.get("speculative") is not None:
        options["speculative"] = speculative_option(options["speculative"], f"{where}speculative")
    if "slots" in obj:
        options["slots"] = check_int(obj["slots"], f"{where}slots", 1, limits.max_slots)
    return options


def speculative_option(raw, where: str) -> SpeculativeConfig:
    """`{"method": "prompt_lookup", "k": 4}` (optionally max_ngram, min_ngram) as a SpeculativeConfig."""
    if not isinstance(raw, dict):
        raise WorkloadError(where, 'must be an object like {"method": "prompt_lookup", "k": 4}, or null')
    reject_unknown(raw, {"method", "k", "max_ngram", "min_ngram"}, f"{where}.")
    if "method" not in raw:
        raise WorkloadError(f"{where}.method", 'is required ("prompt_lookup")')
    try:
        return SpeculativeConfig(**raw)
    except ValueError as e:
        key = next((k for k in ("method", "min_ngram", "max_ngram", "k") if f"speculative.{k}" in str(e)), None)
        raise WorkloadError(f"{where}.{key}" if key else where, str(e).split(" ", 1)[1]) from None


def _config(base: EngineConfig, options: dict, where: str) -> EngineConfig:
    try:
        return replace(base, **options)
    except (ValueError, TypeError) as e:
        key = next((k for k in options if str(e).startswith(k)), None) or next((k for k in options if k in str(e)), None)
        raise WorkloadError(f"{where}{key}" if key else where.rstrip(".") or "workload", str(e)) from None


def parse_lanes(raw, defaults: EngineConfig, limits: Limits, timed: bool = False) -> tuple[LaneSpec, ...]:
    """1 to `max_lanes` lanes, each a policy name or {"name", "policy", ...its own options}, with distinct names."""
    if not isinstance(raw, list) or not 1 <= len(raw) <= limits.max_lanes:
        raise WorkloadError("lanes", f"must be a list of 1 to {limits.max_lanes} lanes, each a name from "
                                     f"{', '.join(TRAITS)} or an object {{\"name\", \"policy\", ...options}}")
    specs, names = [], set()
    for i, item in enumerate(raw):
        at = f"lanes[{i}]"
        if isinstance(item, str):
            if item not in TRAITS:
                raise WorkloadError(at, f"unknown lane {item[:40]!r}: use one of {', '.join(TRAITS)}, or an object "
                                        f"{{\"name\", \"policy\", ...options}}")
            spec, name_field = LaneSpec.plain(item, defaults), at
        elif isinstance(item, dict):
            reject_unknown(item, LANE_KEYS, f"{at}.")
            engine = item.get("engine", "batch-lanes")
            if engine not in ENGINES:
                raise WorkloadError(f"{at}.engine", f"must be one of {', '.join(ENGINES)}, got {str(engine)[:40]!r}")
            vllm = check_vllm_lane(item, at, limits.max_vllm_workers) if engine == "vllm" else None
            policy = "continuous" if vllm is not None else item.get("policy")
            if not isinstance(policy, str) or policy not in TRAITS:
                raise WorkloadError(f"{at}.policy", f"must be one of {', '.join(TRAITS)}")
            name = check_str(item.get("name", "vLLM" if vllm is not None else policy), f"{at}.name",
                             limits.max_id_chars).strip()
            for key, policies in options_only_for().items():
                if key in item and policy not in policies:
                    raise WorkloadError(f"{at}.{key}", f"applies to {' and '.join(policies)} lanes, not to a "
                                                       f"{policy} lane")
            own = item if vllm is None else {k: v for k, v in item.items() if k not in PARALLEL}  # vLLM's split, not ours
            config = _config(defaults, _options(own, f"{at}.", limits, timed), f"{at}.")
            tensor_parallel_check(own, at, config, limits)
            pipeline_parallel_check(own, at, policy, config, limits)
            spec = LaneSpec(name, policy, config, *(("vllm", vllm) if vllm is not None else ()),
                            fleet=fleet_option(item, at, limits),
                            disaggregation=disaggregation_option(item, at, limits, config))
            name_field = f"{at}.name"
        else:
            raise WorkloadError(at, f"must be a lane name or an object, got {type(item).__name__}")
        if spec.name in names:
            raise WorkloadError(name_field, f"duplicate lane name {spec.name!r}: lanes need distinct names")
        names.add(spec.name)
        specs.append(spec)
    return tuple(specs)


def _arrival(value, field: str, latest: int) -> int:
    """A step arrival: the field counts steps from 0, the page and its tables from 1, so a refusal says both."""
    if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= latest:
        why = (f"arrival {value} (step {value + 1}) is past the last step {latest + 1}" if value > latest
               else "arrival 0 is step 1, the first")
        raise WorkloadError(field, f"must be from 0 to {latest}, got {value}: {why} (arrival counts steps from 0, "
                                   f"the page counts them from 1)")
    return check_int(value, field, 0, latest)


def _requests(raw, limits: Limits) -> tuple[RequestSpec, ...]:
    if not isinstance(raw, list):
        raise WorkloadError("requests", "must be a list of request objects")
    if not 1 <= len(raw) <= limits.max_requests:
        raise WorkloadError("requests", f"must hold 1 to {limits.max_requests} requests, got {len(raw)}")
    timed = any(isinstance(r, dict) and "arrival_ms" in r for r in raw)
    specs, seen = [], set()
    for i, r in enumerate(raw):
        where = f"requests[{i}]"
        if not isinstance(r, dict):
            raise WorkloadError(where, f"must be an object, got {type(r).__name__}")
        reject_unknown(r, REQUEST_KEYS, f"{where}.")
        for key in ("id", "prompt", "max_new_tokens"):
            if key not in r:
                raise WorkloadError(f"{where}.{key}", "is required")
        if timed and "arrival" in r:
            raise WorkloadError(f"{where}.arrival", "other requests give arrival_ms: a workload counts arrivals in "
                                                   "steps (arrival) or in milliseconds (arrival_ms), not both")
        rid = check_str(r["id"], f"{where}.id", limits.max_id_chars)
        if rid in seen:
            raise WorkloadError(f"{where}.id", f"duplicate id {rid!r}")
        seen.add(rid)
        ignore_eos = r.get("ignore_eos", True)
        if not isinstance(ignore_eos, bool):
            raise WorkloadError(f"{where}.ignore_eos", "must be true or false")
        spec = RequestSpec(
            id=rid,
            prompt=check_str(r["prompt"], f"{where}.prompt", limits.max_prompt_chars),
            max_new_tokens=check_int(r["max_new_tokens"], f"{where}.max_new_tokens", 1, limits.max_new_tokens),
            ignore_eos=ignore_eos,
            arrival=0 if timed else _arrival(r.get("arrival", 0), f"{where}.arrival", limits.max_arrival),
            arrival_ms=float(check_number(r.get("arrival_ms", 0), f"{where}.arrival_ms", 0, limits.max_arrival_ms))
            if timed else None,
            priority=check_int(r.get("priority", 0), f"{where}.priority", -1000, 1000),
            temperature=float(check_number(r.get("temperature", 0), f"{where}.temperature", 0, 2)),
            seed=None if r.get("seed") is None else check_int(r["seed"], f"{where}.seed", *INT64),
            session=None if r.get("session") is None else check_str(r["session"], f"{where}.session",
                                                                     limits.max_id_chars),
        )
        siblings = expand(spec, check_int(r.get("n", 1), f"{where}.n", 1, limits.max_n))
        for s in siblings if len(siblings) > 1 else ():
            if s.id in seen or len(s.id) > limits.max_id_chars:
                raise WorkloadError(f"{where}.id", f"its samples' ids ({siblings[0].id}, ...) " + (
                    f"include {s.id!r}, an id another request has" if s.id in seen
                    else f"run to {len(s.id)} characters, the limit is {limits.max_id_chars}"))
        seen.update(s.id for s in siblings)
        specs.extend(siblings)
        if len(specs) > limits.max_requests:
            raise WorkloadError(f"{where}.n" if len(siblings) > 1 else "requests",
                                f"makes {len(specs)} requests in all (each of n samples is a request), the limit "
                                f"is {limits.max_requests}")
    return tuple(specs)


def parse_workload(obj, limits: Limits = Limits(), slots: int | None = None, lanes=None, **overrides) -> Workload:
    """Check a workload object against `limits`. `slots` and `overrides` (engine options) replace the workload's own
    options, which every lane inherits unless it sets its own; `lanes` replaces the workload's lanes."""
    if not isinstance(obj, dict):
        raise WorkloadError("workload", f"must be an object, got {type(obj).__name__}")
    reject_unknown(obj, WORKLOAD_KEYS, "")
    if "trace" in obj:  # a slice of a production trace (engine/workload/trace.py): its requests and block size
        obj = expand_trace(obj, limits)
    name = check_str(obj.get("name", "untitled"), "name", limits.max_name_chars)
    description = check_str(obj.get("description", ""), "description", limits.max_description_chars, allow_empty=True)
    clock = obj.get("clock")
    if clock is not None and clock not in CLOCKS:
        raise WorkloadError("clock", f"must be \"ms\" or \"steps\", got {str(clock)[:40]!r}")
    if "generate" in obj:
        if "requests" in obj:
            raise WorkloadError("generate", "give requests or generate, not both")
        raw_requests = generate_requests(obj["generate"], limits)
    else:
        raw_requests = obj.get("requests")
    requests = _requests(raw_requests, limits)
    timed = any(r.arrival_ms is not None for r in requests)
    if "policy" in obj:  # the workload-level name scheduling_policy had before lanes had a policy of their own
        if "scheduling_policy" in obj:
            raise WorkloadError("policy", "give scheduling_policy only (policy is its older name)")
        if not isinstance(obj["policy"], str) or obj["policy"] not in ORDERS:
            raise WorkloadError("policy", f"must be one of {', '.join(ORDERS)}, got {str(obj['policy'])[:40]!r}")
        obj = {**{k: v for k, v in obj.items() if k != "policy"}, "scheduling_policy": obj["policy"]}
    given = {**obj, **{k: v for k, v in overrides.items() if v is not None}}
    if slots is not None:
        given["slots"] = slots
    options = _options(given, "", limits, timed)
    config = _config(EngineConfig(), options, "")
    lane_specs = parse_lanes(obj.get("lanes", list(DEFAULT_LANES)) if lanes is None else lanes, config, limits, timed)
    return Workload(name, description, config, requests, lane_specs, clock, parse_slo(obj.get("slo")))


def load_workload(path: str | Path, limits: Limits = CLI_LIMITS, **overrides) -> Workload:
    return parse_workload(read_json(path), limits, **overrides)


def read_json(path: str | Path):
    try:
        return json.loads(Path(path).read_text())
    except OSError as e:
        raise WorkloadError("workload", f"cannot read {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise WorkloadError("workload", f"{path} is not valid JSON: {e}") from None
