"""Every limit a workload is checked against, in one place, and the small checks that name the field.

A `WorkloadError` carries the dotted path of the bad field (`requests[2].max_new_tokens`,
`lanes[1].chunk_size`, `generate.rate`), which the page uses to put the message next to that field.
It does not know what a workload holds (workload.py) or anything the tokenizer counts (engine.Engine.prepare).
"""
from dataclasses import dataclass


class WorkloadError(ValueError):
    """A workload that breaks a rule; `field` is a dotted path such as `requests[2].max_new_tokens`."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class Limits:
    max_requests: int = 32          # requests per workload (each of a request's n samples counts)
    max_n: int = 8                  # samples of one request (its `n`): half the largest lane's slots, so a
                                    # request's samples can run side by side with other requests
    max_slots: int = 16             # batch rows per lane
    max_lanes: int = 4              # lanes per run
    max_new_tokens: int = 256       # tokens one request may write
    max_prompt_chars: int = 4000    # characters of one prompt
    max_prompt_tokens: int = 1024   # chat-templated prompt tokens of one request
    max_arrival: int = 500          # latest arrival step
    max_arrival_ms: int = 600_000   # latest arrival in milliseconds (10 minutes)
    max_id_chars: int = 32          # characters of a request id or a lane name
    max_name_chars: int = 80        # characters of the workload name
    max_description_chars: int = 600  # characters of the workload description (a preset's lesson)
    max_wait: int = 100             # dynamic lane's max_wait (steps)
    max_kv_budget: int = 65536      # KV tokens per lane (the kv_budget option)
    max_lane_kv_tokens: int = 8192  # KV a lane allocates: slots x (longest prompt + largest max_new_tokens)
    max_total_tokens: int = 12288   # prompt + new tokens of all requests together: bounds a run's compute
    fleets: bool = True             # data-parallel lanes (engine/fleet.py): the page draws each replica as a sub-lane
    max_tensor_parallel: int = 3    # ranks a tensor-parallel lane may spawn (a process each, for the run's length):
                                    # 3 is SmolLM2-135M's size (its 9 query and 3 KV heads), the tensor-parallel preset's
    max_pipeline_parallel: int = 2  # stages a pipeline-parallel lane may spawn (processes each): the pipeline-bubbles preset's
    max_vllm_workers: int = 1       # worker processes a vLLM lane's own split may start (each compiles for minutes)


# A looser set for the CLI: the simulator previews big workloads, and a file on disk is trusted more.
CLI_LIMITS = Limits(max_requests=100_000, max_n=64, max_slots=256, max_lanes=8, max_new_tokens=100_000,
                    max_prompt_chars=1_000_000, max_prompt_tokens=100_000, max_arrival=10_000_000,
                    max_arrival_ms=100_000_000, max_id_chars=200, max_name_chars=500, max_description_chars=5000, max_wait=100_000,
                    max_kv_budget=100_000_000, max_lane_kv_tokens=100_000_000, max_total_tokens=1_000_000_000,
                    max_tensor_parallel=9, max_pipeline_parallel=30, max_vllm_workers=9)


def check_int(value, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WorkloadError(field, f"must be an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise WorkloadError(field, f"must be from {lo} to {hi}, got {value}")
    return value


def check_number(value, field: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:  # NaN != NaN
        raise WorkloadError(field, f"must be a number, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise WorkloadError(field, f"must be from {lo:g} to {hi:g}, got {value:g}")
    return value


def check_str(value, field: str, max_chars: int, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise WorkloadError(field, f"must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise WorkloadError(field, "must not be empty")
    if len(value) > max_chars:
        raise WorkloadError(field, f"is {len(value)} characters, the limit is {max_chars}")
    if "\x00" in value:
        raise WorkloadError(field, "must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise WorkloadError(field, "is not valid text: it holds a lone surrogate (half of a UTF-16 pair)") from None
    return value


def reject_unknown(obj: dict, allowed: set[str], where: str) -> None:
    extra = sorted(str(k) for k in obj if k not in allowed)
    if extra:
        raise WorkloadError(f"{where}{extra[0]}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
