"""A tensor-parallel lane's runner: the driver of N rank processes that each hold 1/N of the model (tp_rank.py).

`TensorParallelRunner` is what the lane steps, with the `Runner` interface: at start it spawns the lane's N ranks
(each its own process, joined in one gloo group on a free port of 29800-29899) and waits until each has loaded its
shard; each step it sends every rank the step's rows (slot, state, tokens, start, block table, request id) and
block copies, waits for every rank's reply, and picks the tokens itself from the logits rank 0 sends back (greedy,
sampled, grammars and logprobs exactly as `ModelRunner.pick` does, on the lane's own requests). The step's
`ForwardResult.tp` carries the ranks' mean compute and all-reduce time, whole and per decoder layer; `processes`,
`transport` and `device` are what the lane's `placement` is built from (engine/report/placement.py).

Ranks are the lane's own: they end when the lane is done (`close`), when the runner is dropped, or when the driver's
process goes. Every wait has a timeout: a rank that dies or stops answering ends the run with `TensorParallelError`
naming the rank (and its exit code), and the other ranks are stopped, never left hanging.

Which sizes a model takes is `tp_problem`'s to say (the heads must divide). What it does not know: scheduling,
policies; speculative rows (refused by EngineConfig) and prompt logprobs (not carried to the ranks).
"""
import os
import statistics
import time

import torch

from engine.sched.batch import ForwardResult, Row, call_kind
from engine.step import Forward, SlotState
from engine.worker.model import LoadedModel
from engine.worker.rank_group import START_TIMEOUT_S, GroupStore, RankGroup, SplitLaneError
from engine.worker.runner import ModelRunner
from engine.worker.tp_rank import COLLECTIVE_TIMEOUT_S, rank_main

TRANSPORT = "gloo all-reduce over loopback TCP"  # what carries the ranks' partial sums (the placement's words)
STEP_TIMEOUT_S = COLLECTIVE_TIMEOUT_S + 30  # a step's replies: the ranks' own collective timeout fires first


class TensorParallelError(SplitLaneError):
    """A rank died, failed or stopped answering: the lane cannot go on."""


def tp_problem(lm: LoadedModel | None, size: int) -> str | None:
    """Why the model cannot be split over `size` ranks (None: it can)."""
    if lm is None:
        return "needs the real model: the simulator has no weights to shard (run it with --backend model)"
    cfg = lm.model.config
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    if heads % size or kv % size:
        sizes = [n for n in range(2, heads + 1) if heads % n == 0 and kv % n == 0]
        return (f"must divide the model's {heads} query heads and {kv} KV heads (each rank holds whole heads); "
                f"{size} does not. Sizes that do: {', '.join(map(str, sizes)) or 'none above 1'}")
    return split_problem(lm)


def split_problem(lm: LoadedModel) -> str | None:
    """Why this loaded model cannot be split over processes at all (None: it can)."""
    if lm.folder is None:
        return "needs a model loaded from a Hugging Face folder (each process loads its part from it)"
    if lm.device.type != "cpu" or lm.dtype != torch.float32:
        return "runs its processes on CPU cores in float32 (gloo); this model is loaded elsewhere"
    return None


class TensorParallelRunner:
    simulated = False
    pick, hold_eos = ModelRunner.pick, ModelRunner.hold_eos           # the lane's requests, the lane's tokenizer
    text_delta, decode_text, is_special = ModelRunner.text_delta, ModelRunner.decode_text, ModelRunner.is_special

    def __init__(self, lm: LoadedModel, size: int, slots: int, num_blocks: int, block_size: int = 16,
                 host_blocks: int = 0, fused: bool = False):
        assert tp_problem(lm, size) is None, tp_problem(lm, size)
        self.lm, self.size, self.fused = lm, size, fused
        pool = {"slots": slots, "num_blocks": num_blocks, "block_size": block_size, "host_blocks": host_blocks,
                "fused": fused, "pad_id": lm.pad_id}
        threads = max(1, (os.cpu_count() or 1) // size)
        self.store = GroupStore(COLLECTIVE_TIMEOUT_S)  # the group's rendezvous, held for the lane's life
        self.ranks = RankGroup(rank_main, [(size, self.store.port, str(lm.folder), pool, threads) for _ in range(size)],
                               "tp-rank", "tensor-parallel", "rank", TensorParallelError)
        self.procs = self.ranks.procs
        ready = self.ranks.replies(START_TIMEOUT_S, "ready")
        self.kv_bytes = sum(info["kv_bytes"] for info in ready)   # every rank's pool: its own K/V heads
        self.shard = ready[0]["q_proj"]                            # rank 0's q_proj: (heads / N * head_dim, hidden)
        self.pids = [info["pid"] for info in ready]
        self.processes = ([{"role": "driver", "pid": os.getpid(), "threads": torch.get_num_threads()}]  # the lane's
                          + [{"role": f"tp rank {rank}", "pid": pid, "threads": threads}         # placement's
                             for rank, pid in enumerate(self.pids)])
        self.transport, self.device = TRANSPORT, "cpu"
        self._reference_ms: float | None = None

    def close(self) -> None:
        """Stop the ranks (the lane is done, or failed). Idempotent."""
        self.ranks.close()

    # -- the Runner interface -------------------------------------------------------------------------------
    def run(self, rows: list[Row], swap_out=(), swap_in=(), copies=()) -> ForwardResult:
        assert not any(r.proposed for r in rows), "speculative rows on a tensor-parallel lane (EngineConfig refuses it)"
        prefills = [r for r in rows if r.state is SlotState.PREFILL]
        fused = bool(self.fused and prefills and len(prefills) < len(rows))
        kind = Forward.FUSED if fused else call_kind(2 if prefills and len(prefills) < len(rows) else 1, bool(prefills))
        t0 = time.perf_counter()
        self.ranks.send(("run", [(r.slot, r.state.value, r.token_ids, r.start, r.wants_token, tuple(r.blocks),
                            r.request.id) for r in rows],
                   {"swap_out": list(swap_out), "swap_in": list(swap_in), "copies": list(copies)}))
        replies = self.ranks.replies(STEP_TIMEOUT_S, "done")
        requests = {r.request.id: r.request for r in rows}
        tokens = {}
        for logits, wanted in replies[0][0]:  # rank 0's: per forward call, the logits of the rows that want a token
            tokens.update(self.pick(torch.from_numpy(logits), [(s, b, q, requests[rid]) for s, b, q, rid in wanted]))
        forward_ms = (time.perf_counter() - t0) * 1000
        figures = [r[1] for r in replies]
        tp = {"compute_ms": statistics.fmean(f["forward_ms"] - f["allreduce_ms"] for f in figures),
              "allreduce_ms": statistics.fmean(f["allreduce_ms"] for f in figures),
              "allreduces": figures[0]["allreduces"],
              "layer_ms": tuple((statistics.fmean(f["layers"][i][0] for f in figures),    # per decoder layer: compute,
                                 statistics.fmean(f["layers"][i][1] for f in figures))    # all-reduce (mean over ranks)
                                for i in range(len(figures[0]["layers"])))}
        return ForwardResult(tokens if rows else {}, forward_ms, kind if rows else Forward.NONE, tp=tp)

    def reference_ms(self) -> float:
        """A one-row forward on the ranks, timed once (what a step that computes nothing lasts before one measured)."""
        if self._reference_ms is None:
            self.ranks.send(("reference",))
            self._reference_ms = self.ranks.replies(STEP_TIMEOUT_S, "done")[0][0]
        return self._reference_ms
