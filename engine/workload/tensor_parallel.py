"""A lane's `tensor_parallel_size`, checked at the edge for what it cannot combine with.

The size itself (an integer from 1 to 9, not with speculative decoding) is EngineConfig's to check; whether the
model's heads divide by it is the engine's (engine/worker/tensor_parallel.py `tp_problem`: it knows the model).
Here: a tensor-parallel lane is one engine whose forward is split over ranks, so it does not combine with a fleet
(data_parallel_size: each replica would need its own ranks; not built), a P/D lane, or a vLLM lane inheriting the
workload's size (a vLLM lane's own `tensor_parallel_size` is vLLM's, engine/peers/vllm_options.py); nor more
ranks than the limits allow (the server's: none yet). It does not know how a tensor-parallel lane runs.
"""
from engine.config import EngineConfig
from engine.limits import Limits, WorkloadError

REFUSED = {
    "data_parallel_size": "a fleet of tensor-parallel replicas (ranks per replica) is not built: give the lane one "
                          "or the other",
    "disaggregation": "P/D engines with tensor-parallel ranks are not built: give the lane one or the other",
    "engine": "a vLLM lane splits over vLLM's own workers: give it tensor_parallel_size on the lane object, not the "
              "workload's (engine/peers/vllm_options.py)",
}


def tensor_parallel_check(item: dict, at: str, config: EngineConfig, limits: Limits) -> None:
    """WorkloadError naming the field a tensor-parallel lane cannot take (nothing for a lane of one process)."""
    if config.tensor_parallel_size == 1:
        return
    if config.tensor_parallel_size > limits.max_tensor_parallel:
        field = f"{at}.tensor_parallel_size" if "tensor_parallel_size" in item else "tensor_parallel_size"
        raise WorkloadError(field, f"is at most {limits.max_tensor_parallel} here (each rank is a process of its own; "
                                   "tensor-parallel lanes run from the command line for now)")
    given = {"data_parallel_size": item.get("data_parallel_size", 1) != 1, "disaggregation": "disaggregation" in item,
             "engine": item.get("engine", "batch-lanes") != "batch-lanes"}
    for key, why in REFUSED.items():
        if given[key]:
            raise WorkloadError(f"{at}.{key}", f"does not combine with tensor_parallel_size "
                                               f"{config.tensor_parallel_size}: {why}")
