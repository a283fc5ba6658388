"""The engine: one model (or none, for the simulator), many runs; a run is its lanes stepped together.

`Engine.prepare` tokenizes a workload's prompts once and checks what needs the tokenizer (prompt
tokens, the model's context, the KV budget); `Engine.start` builds one lane per policy, each with
its own scheduler, runner and KV cache; `Run.tick` advances every unfinished lane by one step, so
tick k holds step k of every lane: one shared clock for the CLI and the page.
"""
from dataclasses import replace

from .block_manager import blocks_for
from .config import LANES
from .lane import Lane
from .model import LoadedModel
from .policies import POLICIES
from .request import RequestSpec, max_row_len, row_capacity
from .runner import ModelRunner, SimRunner, estimate_prompt_tokens
from .step import StepRecord
from .workload import Limits, Workload, WorkloadError


class Run:
    def __init__(self, workload: Workload, lanes: list[Lane]):
        self.workload = workload
        self.lanes = {lane.name: lane for lane in lanes}
        self.t = 0

    @property
    def done(self) -> bool:
        return all(lane.done for lane in self.lanes.values())

    def tick(self) -> dict[str, StepRecord | None]:
        """Step every lane once (a finished lane gives None); call until `done`."""
        self.t += 1
        return {name: lane.step() for name, lane in self.lanes.items()}

    def run_to_end(self) -> None:
        while not self.done:
            self.tick()

    def records(self) -> dict[str, list[StepRecord]]:
        return {name: lane.records for name, lane in self.lanes.items()}


class Engine:
    def __init__(self, lm: LoadedModel | None, limits: Limits = Limits()):
        self.lm = lm            # None: the step-clock simulator
        self.limits = limits

    @property
    def simulated(self) -> bool:
        return self.lm is None

    def prepare(self, workload: Workload) -> Workload:
        """Tokenize every prompt and check the limits that need tokens; raise WorkloadError naming the field."""
        specs = []
        for i, spec in enumerate(workload.requests):
            ids = estimate_prompt_tokens(spec.prompt) if self.lm is None else self.lm.encode_prompt(spec.prompt)
            n = ids if isinstance(ids, int) else len(ids)
            where = f"requests[{i}]"
            if n > self.limits.max_prompt_tokens:
                raise WorkloadError(f"{where}.prompt", f"is {n} tokens, the limit is {self.limits.max_prompt_tokens}")
            if self.lm is not None and n + spec.max_new_tokens > self.lm.max_context:
                raise WorkloadError(f"{where}.max_new_tokens", f"prompt ({n} tokens) + max_new_tokens "
                                    f"({spec.max_new_tokens}) exceeds the model's context of {self.lm.max_context}")
            spec = replace(spec, prompt_ids=tuple([0] * ids if isinstance(ids, int) else ids))
            config = workload.config
            if config.kv_blocks is not None and blocks_for(max_row_len(spec), config.kv_block_size) > config.kv_blocks:
                raise WorkloadError(f"{where}.max_new_tokens", f"prompt ({n} tokens) + max_new_tokens "
                                    f"({spec.max_new_tokens}) can never fit the KV budget of {config.kv_budget} "
                                    f"tokens ({config.kv_blocks} blocks of {config.kv_block_size})")
            specs.append(spec)
        total = sum(len(s.prompt_ids) + s.max_new_tokens for s in specs)
        if total > self.limits.max_total_tokens:
            raise WorkloadError("requests", f"hold {total} prompt + new tokens in all, the limit is "
                                f"{self.limits.max_total_tokens}")
        lane_kv = workload.config.slots * row_capacity(specs)
        if lane_kv > self.limits.max_lane_kv_tokens:
            raise WorkloadError("slots", f"{workload.config.slots} slots x {row_capacity(specs)} tokens (longest "
                                f"prompt + largest max_new_tokens) = {lane_kv} KV tokens per lane, the limit is "
                                f"{self.limits.max_lane_kv_tokens}")
        return replace(workload, requests=tuple(specs))

    def start(self, workload: Workload, lanes: list[str] = ("static", "continuous")) -> Run:
        """A run of `workload` (already prepared) on the given lanes."""
        assert lanes and len(set(lanes)) == len(lanes) and set(lanes) <= set(LANES), "check_lanes() them first"
        assert all(s.prompt_ids for s in workload.requests), "prepare() the workload first"
        config, specs = workload.config, list(workload.requests)
        row_len = row_capacity(specs)
        kv_capacity = config.kv_budget // config.kv_block_size * config.kv_block_size if config.kv_budget \
            else config.slots * row_len
        eos_ids = frozenset() if self.lm is None else self.lm.eos_ids
        pad_id = 0 if self.lm is None else self.lm.pad_id
        built = []
        for name in lanes:
            scheduler = POLICIES[name](config, specs, eos_ids=eos_ids, pad_id=pad_id)
            runner = SimRunner(config.slots, row_len) if self.lm is None else \
                ModelRunner(self.lm, config.slots, row_len, fused=config.fused)
            built.append(Lane(scheduler, runner, kv_capacity))
        return Run(workload, built)


def run_workload(engine: Engine, workload: Workload, lanes: list[str] = ("static", "continuous")) -> Run:
    run = engine.start(engine.prepare(workload), lanes)
    run.run_to_end()
    return run


__all__ = ["Engine", "Run", "run_workload", "RequestSpec"]
