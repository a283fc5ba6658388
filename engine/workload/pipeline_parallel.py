"""A lane's `pipeline_parallel_size` and `micro_batches`, checked at the edge for what they cannot combine with.

The numbers themselves (a size from 1 to 30, micro-batches from 1 to the lane's slots, not with tensor parallelism,
speculative decoding or fused steps) are EngineConfig's to check; whether the model's layers divide by the size is
the engine's (engine/worker/pipeline_parallel.py `pp_problem`: it knows the model). Here: a pipeline-parallel lane is
one continuous engine whose forward runs through stages, so it does not combine with another policy, a fleet
(data_parallel_size), a P/D lane or a vLLM lane (vLLM's own `-pp` is another item); nor more stages than the limits
allow. It does not know how a pipeline-parallel lane runs.
"""
from engine.config import EngineConfig
from engine.limits import Limits, WorkloadError

REFUSED = {
    "policy": "the stages run a continuous lane's steps (split into micro-batches); give it policy \"continuous\"",
    "data_parallel_size": "a fleet of pipeline-parallel replicas (stages per replica) is not built: give the lane one "
                          "or the other",
    "disaggregation": "P/D engines with pipeline stages are not built: give the lane one or the other",
    "engine": "a vLLM lane has its own pipeline parallelism (vllm -pp), not this option",
}


def pipeline_parallel_check(item: dict, at: str, policy: str, config: EngineConfig, limits: Limits) -> None:
    """WorkloadError naming the field a pipeline-parallel lane cannot take (nothing for a lane of one process)."""
    size = config.pipeline_parallel_size
    if size == 1:
        return
    if size > limits.max_pipeline_parallel:
        field = f"{at}.pipeline_parallel_size" if "pipeline_parallel_size" in item else "pipeline_parallel_size"
        raise WorkloadError(field, f"is at most {limits.max_pipeline_parallel} here (each stage is a process of its "
                                   "own)")
    given = {"policy": policy != "continuous", "data_parallel_size": item.get("data_parallel_size", 1) != 1,
             "disaggregation": "disaggregation" in item, "engine": item.get("engine", "batch-lanes") != "batch-lanes"}
    for key, why in REFUSED.items():
        if given[key]:
            raise WorkloadError(f"{at}.{key}", f"does not combine with pipeline_parallel_size {size}: {why}")
