"""A lane's `disaggregation` option, checked at the edge: `{"prefill": P, "decode": D}` engines (1 to 3 each).

A lane that sets it runs as a P/D lane (engine/disaggregation.py): prefill engines compute prompts and first tokens,
decode engines take each request's KV blocks and run decode steps only; a vLLM lane (`"engine": "vllm"`) with it is
a real vLLM pair, one engine a side (engine/peers/vllm_pd_lane.py). Every refusal names the field: a count out of
range, an unknown key, a policy other than continuous, a fleet (data_parallel_size) or an option this first version
does not carry across a hand-off (a KV budget, which can preempt a decode engine's request into a prefill there;
speculative decoding). It does not know how a P/D lane runs.
"""
from engine.config import MAX_PD_ENGINES, MIN_PD_ENGINES, DisaggConfig, EngineConfig
from engine.limits import Limits, WorkloadError, reject_unknown

PD_KEYS = ("prefill", "decode")


def disaggregation_option(item: dict, at: str, limits: Limits, config: EngineConfig) -> DisaggConfig | None:
    """A lane's disaggregation as a DisaggConfig (None: a colocated lane); `config`: the lane's resolved options."""
    if "disaggregation" not in item:
        return None
    raw, where = item["disaggregation"], f"{at}.disaggregation"
    if not isinstance(raw, dict):
        raise WorkloadError(where, 'must be an object like {"prefill": 1, "decode": 1}')
    reject_unknown(raw, set(PD_KEYS), f"{where}.")
    for key in PD_KEYS:
        value = raw.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or not MIN_PD_ENGINES <= value <= MAX_PD_ENGINES:
            raise WorkloadError(f"{where}.{key}", f"must be an integer from {MIN_PD_ENGINES} to {MAX_PD_ENGINES}, "
                                                  f"got {str(value)[:40]}")
    if not limits.fleets:
        raise WorkloadError(where, "P/D lanes are off on this server (limits.fleets)")
    if item.get("engine") == "vllm":   # a real vLLM pair (engine/peers/vllm_pd_lane.py): one engine a side
        for key in PD_KEYS:
            if raw.get(key, 1) != 1:
                raise WorkloadError(f"{where}.{key}", "a vLLM P/D lane is one vLLM prefill engine and one vLLM "
                                                      "decode engine (ExampleConnector joins a pair)")
    elif item.get("engine", "batch-lanes") != "batch-lanes" or item.get("policy") != "continuous":
        raise WorkloadError(where, "takes a continuous lane of our engine: each prefill and decode engine is a "
                                   "continuous engine")
    if item.get("data_parallel_size", 1) != 1 or "router" in item:
        raise WorkloadError(f"{at}.data_parallel_size" if "data_parallel_size" in item else f"{at}.router",
                            "a P/D lane is its own set of engines (it sends each arrival to its least loaded prefill "
                            "engine): give it prefill and decode counts, not a fleet")
    refused = {"kv_budget": (config.kv_budget is not None, "a KV budget could preempt a decode engine's request and "
                             "make it prefill there: this first version of P/D lanes runs without one"),
               "speculative": (config.speculative is not None, "P/D lanes do not carry speculative decoding across "
                               "the hand-off yet")}
    for key, (bad, why) in refused.items():
        if bad:
            raise WorkloadError(f"{at}.{key}" if key in item else key, why)
    return DisaggConfig(raw.get("prefill", 1), raw.get("decode", 1))
