"""A pipeline-parallel lane's runner: the driver of p stage processes that each hold L/p of the model's layers
(pp_stage.py).

`PipelineParallelRunner` is what the lane steps, with the `Runner` interface: at start it spawns the lane's p stages
(through `rank_group.RankGroup`, as the tensor-parallel driver does: one gloo group on a free port, every wait with a
timeout, a stage that dies ends the run naming it) and aligns each stage's clock with its own; each step it sends
every stage the step's rows, block copies and micro-batch count, waits for every stage's reply, and picks the tokens
from the logits the last stage sends back (`ModelRunner.pick`, on the lane's own requests). The stages move the
activations between them themselves (torch.distributed.pipelining). The step's `ForwardResult.pp` carries the stage
x time grid (`pipeline_figures`): each stage's micro-batches, start and end in ms from the step's start on the
driver's clock, the measured bubble fraction and GPipe's formula beside it.

What it does not know: scheduling, policies; speculative rows, fused steps and prompt logprobs (refused or not
carried, as for tensor-parallel lanes).
"""
import os
import time

import torch

from engine.sched.batch import ForwardResult, Row, call_kind
from engine.step import Forward, SlotState
from engine.worker.model import LoadedModel
from engine.worker.pp_stage import stage_main
from engine.worker.tp_rank import COLLECTIVE_TIMEOUT_S
from engine.worker.rank_group import START_TIMEOUT_S, GroupStore, RankGroup, SplitLaneError
from engine.worker.runner import ModelRunner
from engine.worker.tensor_parallel import STEP_TIMEOUT_S, split_problem

TRANSPORT = "gloo send/recv over loopback TCP (torch.distributed.pipelining)"  # what carries the activations
CLOCK_SAMPLES = 5   # round trips per stage when aligning clocks (the one of least delay is kept)


class PipelineParallelError(SplitLaneError):
    """A stage died, failed or stopped answering: the lane cannot go on."""


def pp_problem(lm: LoadedModel | None, size: int) -> str | None:
    """Why the model cannot be cut into `size` stages (None: it can)."""
    if lm is None:
        return "needs the real model: the simulator has no layers to split (run it with --backend model)"
    layers = lm.model.config.num_hidden_layers
    if layers % size:
        sizes = [n for n in range(2, layers + 1) if layers % n == 0]
        return (f"must divide the model's {layers} layers (each stage holds as many); {size} does not. "
                f"Sizes that do: {', '.join(map(str, sizes)) or 'none above 1'}")
    return split_problem(lm)


def pipeline_figures(grid: list[list[tuple]], micro_batches: list[int]) -> dict:
    """The step record's pipeline facts from each stage's micro-batch spans [(call, micro-batch, start_ms, end_ms)]:
    the measured bubble fraction (idle stage-time / stage-time, over the span from the first micro-batch's start to
    the last one's end, on every stage) beside GPipe's (p-1)/(m+p-1), summed over the step's calls when it made two
    (each call fills and drains the pipeline: sum(p-1) idle slots of sum(m_c+p-1) on every stage)."""
    p = len(grid)
    spans = [s for stage in grid for s in stage]
    span = max(s[3] for s in spans) - min(s[2] for s in spans)
    busy = sum(s[3] - s[2] for s in spans)
    return {"stage_grid": tuple(tuple(tuple(round(x, 3) if isinstance(x, float) else x for x in s) for s in stage)
                                for stage in grid),
            "micro_batches": tuple(micro_batches),
            "bubble_fraction": round(max(0.0, 1 - busy / (p * span)), 4) if span > 0 else 0.0,
            "bubble_formula": round(len(micro_batches) * (p - 1) / sum(m + p - 1 for m in micro_batches), 4)}


class PipelineParallelRunner:
    simulated = False
    pick, hold_eos = ModelRunner.pick, ModelRunner.hold_eos           # the lane's requests, the lane's tokenizer
    text_delta, decode_text, is_special = ModelRunner.text_delta, ModelRunner.decode_text, ModelRunner.is_special

    def __init__(self, lm: LoadedModel, size: int, micro_batches: int, slots: int, num_blocks: int,
                 block_size: int = 16, host_blocks: int = 0):
        assert pp_problem(lm, size) is None, pp_problem(lm, size)
        self.lm, self.size, self.micro_batches = lm, size, micro_batches
        pool = {"num_blocks": num_blocks, "block_size": block_size, "host_blocks": host_blocks, "pad_id": lm.pad_id}
        self.threads = max(1, (os.cpu_count() or 1) // size)
        self.store = GroupStore(COLLECTIVE_TIMEOUT_S)  # the group's rendezvous, held for the lane's life
        self.stages = RankGroup(stage_main, [(size, self.store.port, str(lm.folder), pool, self.threads)] * size,
                                "pp-stage", "pipeline", "stage", PipelineParallelError)
        self.procs = self.stages.procs
        ready = self.stages.replies(START_TIMEOUT_S, "ready")
        self.kv_bytes = sum(info["kv_bytes"] for info in ready)   # every stage's pool: its own layers' K/V
        self.layers = [tuple(info["layers"]) for info in ready]   # [first, end) layer of each stage
        self.pids = [info["pid"] for info in ready]
        self.offsets = [self.clock_offset(i) for i in range(size)]
        # where it runs, for the lane's placement (engine/report/placement.py): the stages, and the driver that waits
        self.processes = [{"role": f"pp stage {i}", "pid": pid, "threads": self.threads}
                          for i, pid in enumerate(self.pids)] \
            + [{"role": "driver", "pid": os.getpid(), "threads": torch.get_num_threads()}]
        self.transport, self.device = TRANSPORT, "cpu"
        self._reference_ms: float | None = None

    def clock_offset(self, stage: int) -> float:
        """Stage `stage`'s perf_counter less the driver's, in seconds: from the round trip of least delay, the
        stage's reading set against the trip's midpoint (off by at most half that trip)."""
        best = None
        for _ in range(CLOCK_SAMPLES):
            t0 = time.perf_counter()
            self.stages.send(("clock",), to=stage)
            theirs = self.stages.ask(stage, STEP_TIMEOUT_S)[0]
            t1 = time.perf_counter()
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, theirs - (t0 + t1) / 2)
        return best[1]

    def close(self) -> None:
        """Stop the stages (the lane is done, or failed). Idempotent."""
        self.stages.close()

    def run(self, rows: list[Row], swap_out=(), swap_in=(), copies=()) -> ForwardResult:
        assert not any(r.proposed for r in rows), "speculative rows on a pipeline-parallel lane (refused)"
        prefills = [r for r in rows if r.state is SlotState.PREFILL]
        calls = [c for c in (prefills, [r for r in rows if r.state is not SlotState.PREFILL]) if c]
        t0 = time.perf_counter()
        self.stages.send(("run", [(r.slot, r.state.value, r.token_ids, r.start, r.wants_token, tuple(r.blocks),
                                   r.request.id) for r in rows],
                          {"swap_out": list(swap_out), "swap_in": list(swap_in), "copies": list(copies)},
                          self.micro_batches))
        replies = self.stages.replies(STEP_TIMEOUT_S, "done")
        forward_ms = (time.perf_counter() - t0) * 1000
        if not rows:
            return ForwardResult({}, 0.0, Forward.NONE)
        requests = {r.request.id: r.request for r in rows}
        tokens = {}
        for logits, wanted in replies[-1][0]:  # the last stage's: per call, the logits of the rows that want a token
            tokens.update(self.pick(torch.from_numpy(logits), [(s, b, q, requests[rid]) for s, b, q, rid in wanted]))
        grid = [[(c, mb, (start - off - t0) * 1000, (end - off - t0) * 1000) for c, mb, start, end in reply[1]]
                for reply, off in zip(replies, self.offsets)]
        pp = pipeline_figures(grid, [min(self.micro_batches, len(c)) for c in calls])
        return ForwardResult(tokens, forward_ms, call_kind(len(calls), bool(prefills)), pp=pp)

    def reference_ms(self) -> float:
        """A one-row step through the stages, timed once (what a step that computes nothing lasts before one
        measured, so before any request holds a block): a prefill of one pad token at position 0 of block 0."""
        if self._reference_ms is None:
            t0 = time.perf_counter()
            self.stages.send(("run", [(0, SlotState.PREFILL.value, [self.lm.pad_id], 0, True, (0,), "reference")],
                              {"swap_out": [], "swap_in": [], "copies": []}, 1))
            self.stages.replies(STEP_TIMEOUT_S, "done")
            self._reference_ms = (time.perf_counter() - t0) * 1000
        return self._reference_ms
