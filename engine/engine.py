"""The engine: one model (or none, for the simulator), many runs; a run is its lanes stepped together.

`Engine.prepare` tokenizes a workload's prompts once and checks what needs the tokenizer (prompt
tokens, the model's context, the KV budget); `Engine.start` builds one lane per policy, each with
its own scheduler, runner, KV cache and clock; `Run.tick` advances every unfinished lane by one step,
so tick k holds step k of every lane. Each record carries its lane-clock start and length, which put
every lane on one milliseconds axis for the CLI, the metrics and the page. It does not know how a step is
scheduled or computed (the lane's scheduler and runner do), nor sockets, pages or metrics.
"""
from dataclasses import replace

from engine.kv.block_manager import blocks_for
from engine.config import EngineConfig, LaneSpec
from engine.disaggregation import PDLane
from engine.fleet import FleetLane, replica_specs
from engine.kv.transfer import KVChannel
from engine.sched.handoff import DecodeScheduler, PrefillScheduler
from engine.sched.scheduler import Scheduler
from engine.lane import Lane
from engine.report.placement import placement
from engine.sched.router import Router
from engine.worker.model import LoadedModel
from engine.sched.policies import POLICIES
from engine.spec import RequestSpec, max_row_len, row_capacity
from engine.worker.runner import ModelRunner
from engine.worker.pipeline_parallel import PipelineParallelRunner, pp_problem
from engine.worker.tensor_parallel import TensorParallelRunner, tp_problem
from engine.workload.siblings import written_index
from engine.worker.sim import SIM_COPY_MS_PER_BLOCK, SimNoise, SimRunner, sim_prompt_ids
from engine.step import StepRecord
from engine.peers.vllm_options import vllm_lane_problem
from engine.workload.workload import Limits, Workload, WorkloadError


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

    def close(self) -> None:
        """End what the lanes hold outside this process (a tensor-parallel lane's rank processes): the run finished,
        failed or was cancelled. Idempotent; a lane of one process holds nothing to end."""
        for lane in self.lanes.values():
            runner = getattr(lane, "runner", None)
            if hasattr(runner, "close"):
                runner.close()


class Engine:
    def __init__(self, lm: LoadedModel | None, limits: Limits = Limits(), sim_noise: SimNoise | None = None):
        self.lm = lm            # None: the step-clock simulator
        self.limits = limits
        self.sim_noise = sim_noise  # the simulator only: injected step-time noise (tests), None = the plain cost model

    @property
    def simulated(self) -> bool:
        return self.lm is None

    def prepare(self, workload: Workload) -> Workload:
        """Tokenize every prompt and check the limits that need tokens, for every lane of the workload (its KV
        budget, the KV its slots allocate); raise WorkloadError naming the field."""
        specs = []
        for i, spec in enumerate(workload.requests):
            ids = sim_prompt_ids(spec.prompt) if self.lm is None else self.lm.encode_prompt(spec.prompt)
            n = len(ids)
            where = f"requests[{written_index(workload.requests, i)}]"
            if n > self.limits.max_prompt_tokens:
                raise WorkloadError(f"{where}.prompt", f"is {n} tokens, the limit is {self.limits.max_prompt_tokens}")
            if self.lm is not None and n + spec.max_new_tokens > self.lm.max_context:
                raise WorkloadError(f"{where}.max_new_tokens", f"prompt ({n} tokens) + max_new_tokens "
                                    f"({spec.max_new_tokens}) exceeds the model's context of {self.lm.max_context}")
            specs.append(replace(spec, prompt_ids=tuple(ids)))
        total = sum(len(s.prompt_ids) + s.max_new_tokens for s in specs)
        if total > self.limits.max_total_tokens:
            raise WorkloadError("requests", f"hold {total} prompt + new tokens in all, the limit is "
                                f"{self.limits.max_total_tokens}")
        for lane_index, lane in enumerate(workload.lanes):
            self.check_lane(lane, lane_index, workload, specs)
        return replace(workload, requests=tuple(specs))

    def check_lane(self, lane: LaneSpec, index: int, workload: Workload, specs: list[RequestSpec]) -> None:
        """The KV checks of one lane: every request fits its budget alone; its slots allocate at most the limit."""
        config = lane.config
        where = f" on lane {lane.name!r}" if len(workload.lanes) > 1 else ""
        if lane.engine == "vllm" and (problem := vllm_lane_problem(self.lm)) is not None:
            raise WorkloadError(f"lanes[{index}].engine", f"a vLLM lane {problem}")
        vllm_tp = lane.engine_options.get("tensor_parallel_size", 1) if lane.engine == "vllm" else 1
        if vllm_tp > 1 and (problem := tp_problem(self.lm, vllm_tp)):  # vLLM's ranks hold whole heads too
            raise WorkloadError(f"lanes[{index}].tensor_parallel_size", problem)
        if config.tensor_parallel_size > 1 and (problem := tp_problem(self.lm, config.tensor_parallel_size)):
            at = "" if config.tensor_parallel_size == workload.config.tensor_parallel_size else f"lanes[{index}]."
            raise WorkloadError(f"{at}tensor_parallel_size", problem)
        if config.pipeline_parallel_size > 1 and (problem := pp_problem(self.lm, config.pipeline_parallel_size)):
            at = "" if config.pipeline_parallel_size == workload.config.pipeline_parallel_size else f"lanes[{index}]."
            raise WorkloadError(f"{at}pipeline_parallel_size", problem)
        if self.lm is None and config.speculative is not None:
            field = "speculative" if config.speculative == workload.config.speculative else f"lanes[{index}].speculative"
            raise WorkloadError(field, "needs the model's tokens: the simulator writes placeholders, so prompt lookup "
                                       "could never propose (run it with --backend model)")
        for i, spec in enumerate(specs):
            if config.kv_blocks is not None and blocks_for(max_row_len(spec), config.kv_block_size) > config.kv_blocks:
                raise WorkloadError(f"requests[{written_index(specs, i)}].max_new_tokens", f"prompt ({len(spec.prompt_ids)} tokens) + "
                                    f"max_new_tokens ({spec.max_new_tokens}) can never fit the KV budget of "
                                    f"{config.kv_budget} tokens ({config.kv_blocks} blocks of {config.kv_block_size})"
                                    f"{where}")
        lane_kv = config.slots * row_capacity(specs)
        if lane_kv > self.limits.max_lane_kv_tokens:
            field = "slots" if config.slots == workload.config.slots else f"lanes[{index}].slots"
            raise WorkloadError(field, f"{config.slots} slots x {row_capacity(specs)} tokens (longest prompt + "
                                f"largest max_new_tokens) = {lane_kv} KV tokens per lane{where}, the limit is "
                                f"{self.limits.max_lane_kv_tokens}")

    def start(self, workload: Workload, lanes: list[str] | None = None) -> Run:
        """A run of `workload` (already prepared) on its own lanes, or on the given plain policies (names)."""
        assert all(s.prompt_ids for s in workload.requests), "prepare() the workload first"
        if lanes is not None:
            workload = replace(workload, lanes=tuple(LaneSpec.plain(name, workload.config) for name in lanes))
        specs = list(workload.lanes)
        assert specs and len({s.name for s in specs}) == len(specs), "lane names must be distinct"
        row_len = row_capacity(list(workload.requests))
        eos_ids = frozenset() if self.lm is None else self.lm.eos_ids
        pad_id = 0 if self.lm is None else self.lm.pad_id
        return Run(workload, [self.build_lane(spec, workload, row_len, eos_ids, pad_id) for spec in specs])

    def build_lane(self, spec: LaneSpec, workload: Workload, row_len: int, eos_ids: frozenset[int],
                   pad_id: int) -> Lane | FleetLane | PDLane:
        if spec.fleet is not None:  # N continuous engines behind a router, each built as a lane of its own
            names = replica_specs(spec.name, spec.fleet.size)
            replicas = [self.build_lane(replace(spec, name=name, fleet=None), workload, row_len, eos_ids, pad_id)
                        for name in names]
            for lane in replicas:  # each replica starts empty: the router sends it its requests as they arrive
                lane.scheduler.requests, lane.scheduler.pending = [], []
            router = Router(spec.fleet, spec.config.kv_block_size, names)
            return FleetLane(spec.name, replicas, router, list(workload.requests), workload.timed)
        if spec.disaggregation is not None and spec.engine == "vllm":  # a real vLLM pair, its own KV connector
            from engine.peers.vllm_pd_lane import VllmPDLane
            return VllmPDLane(spec, list(workload.requests), workload.timed, self.lm, str(self.lm.folder),
                              place=placement)
        if spec.disaggregation is not None:  # prefill engines and decode engines, KV blocks copied between
            return self.pd_lane(spec, workload, row_len, eos_ids, pad_id)
        if spec.engine == "vllm":  # a real vLLM engine in its own process (started here: ~60 s)
            from engine.peers.vllm_lane import VllmLane
            return VllmLane(spec, list(workload.requests), workload.timed, self.lm, str(self.lm.folder),
                            place=placement)
        scheduler = POLICIES[spec.policy](spec.config, list(workload.requests), eos_ids=eos_ids, pad_id=pad_id,
                                          timed=workload.timed)
        return self.engine_lane(spec.name, spec.config, scheduler, row_len)

    def engine_lane(self, name: str, config: EngineConfig, scheduler: Scheduler, row_len: int) -> Lane:
        """A lane of one engine: `scheduler` and a runner over a KV pool of its block manager's blocks."""
        kv_capacity = config.kv_budget // config.kv_block_size * config.kv_block_size if config.kv_budget \
            else config.slots * row_len
        noise = None if self.sim_noise is None else self.sim_noise.factors(name)
        blocks = scheduler.blocks
        if self.lm is None:
            runner = SimRunner(config.slots, blocks.num_blocks, blocks.block_size, blocks.host_blocks,
                               fused=config.fused, noise=noise)
        elif config.tensor_parallel_size > 1:  # the model's weights sharded over ranks, each its own process
            runner = TensorParallelRunner(self.lm, config.tensor_parallel_size, config.slots, blocks.num_blocks,
                                          blocks.block_size, host_blocks=blocks.host_blocks, fused=config.fused)
        elif config.pipeline_parallel_size > 1:  # the model's layers cut into stages, each its own process
            runner = PipelineParallelRunner(self.lm, config.pipeline_parallel_size, config.micro_batches, config.slots,
                                            blocks.num_blocks, blocks.block_size, host_blocks=blocks.host_blocks)
        else:
            runner = ModelRunner(self.lm, config.slots, blocks.num_blocks, blocks.block_size,
                                 host_blocks=blocks.host_blocks, fused=config.fused)
        return Lane(name, scheduler, runner, kv_capacity)

    def pd_lane(self, spec: LaneSpec, workload: Workload, row_len: int, eos_ids: frozenset[int],
                pad_id: int) -> PDLane:
        """A P/D lane: its prefill engines and decode engines (each starts empty: the lane sends it its requests)
        and the shared-memory channel its hand-offs go through."""
        specs, pd = list(workload.requests), spec.disaggregation
        engines = {}
        for role, count, cls in (("prefill", pd.prefill, PrefillScheduler), ("decode", pd.decode, DecodeScheduler)):
            engines[role] = []
            for i in range(count):
                scheduler = cls(spec.config, specs, eos_ids=eos_ids, pad_id=pad_id, timed=workload.timed)
                scheduler.requests, scheduler.pending = [], []
                engines[role].append(self.engine_lane(f"{spec.name}/{role}{i}", spec.config, scheduler, row_len))
        runner = engines["prefill"][0].runner
        longest = max(blocks_for(len(s.prompt_ids), spec.config.kv_block_size) for s in specs)
        channel = KVChannel(runner.block_bytes, longest, SIM_COPY_MS_PER_BLOCK if runner.simulated else None)
        return PDLane(spec.name, engines["prefill"], engines["decode"], channel, specs, workload.timed)

__all__ = ["Engine", "Run", "RequestSpec"]
