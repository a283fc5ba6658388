"""One rank of a tensor-parallel lane: a process holding 1/N of the model's weights and 1/N of its K/V heads.

`rank_main` is the process: it joins the lane's gloo group (torch.distributed, a timeout on every collective), loads
the model sharded by transformers' TP plan (`DistributedConfig(tp_size=N)`: Llama's `base_model_tp_plan`, q/k/v and
gate/up column-wise, o and down row-wise, one all-reduce after each of o and down; the lm_head column-wise with its
output gathered), builds a `RankRunner` whose paged KV pool holds only this rank's K/V heads, and then serves the
driver's messages on its pipe until told to stop: every rank runs the same rows (the collectives pair them up), and
rank 0 sends back the logits of the rows that want a token. The driver (`tensor_parallel.TensorParallelRunner`) picks
the tokens. Each reply carries the rank's forward time and the time it spent inside all-reduces
(`torch.distributed.all_reduce` timed in this process: transformers' row-wise layers call it at inference), and per
decoder layer its forward's time less its all-reduces and its all-reduces' time (forward hooks on each layer).

What it does not know: requests beyond their ids, sampling, grammars, logprobs (the driver's), scheduling.
"""
import os
import time
from types import SimpleNamespace

import torch

from engine.sched.batch import Row
from engine.step import SlotState
from engine.worker.model import LoadedModel
from engine.worker.rank_group import join_group, next_message, one_line
from engine.worker.runner import ModelRunner

COLLECTIVE_TIMEOUT_S = 60   # a collective that waits longer than this (a rank died mid-step) raises in every rank


class AllReduceClock:
    """Times every `torch.distributed.all_reduce` this process makes (the wrapper stays for the process's life), and,
    with forward hooks on the decoder layers, each layer's forward and the all-reduces made inside it."""

    def __init__(self, layers: list[torch.nn.Module]):
        import torch.distributed as dist
        self.ms, self.calls, inner = 0.0, 0, dist.all_reduce
        self.layer_ms = [0.0] * len(layers)       # per layer: its forward's wall time (all-reduces included)
        self.layer_reduce_ms = [0.0] * len(layers)  # per layer: of which inside all-reduces
        self.current: int | None = None           # the layer whose forward is running (None: outside the layers)
        self.entered = 0.0

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                ms = (time.perf_counter() - t0) * 1000
                self.ms += ms
                self.calls += 1
                if self.current is not None:
                    self.layer_reduce_ms[self.current] += ms
        dist.all_reduce = timed
        for i, layer in enumerate(layers):
            layer.register_forward_pre_hook(lambda module, args, i=i: self.enter(i))
            layer.register_forward_hook(lambda module, args, output, i=i: self.leave(i))

    def enter(self, i: int) -> None:
        self.current, self.entered = i, time.perf_counter()

    def leave(self, i: int) -> None:
        self.layer_ms[i] += (time.perf_counter() - self.entered) * 1000
        self.current = None

    def take(self) -> tuple[float, int, list[tuple[float, float]]]:
        """(ms, calls, per layer (compute ms, all-reduce ms)) since the last take."""
        layers = [(total - reduce, reduce) for total, reduce in zip(self.layer_ms, self.layer_reduce_ms)]
        out = (self.ms, self.calls, layers)
        self.ms, self.calls = 0.0, 0
        self.layer_ms, self.layer_reduce_ms = [0.0] * len(layers), [0.0] * len(layers)
        return out


class RankRunner(ModelRunner):
    """A ModelRunner over a sharded model whose `pick` keeps the logits (for the driver) instead of choosing."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kept: list[tuple] = []   # per forward call: (logits (W, V) as numpy, [(slot, b, q, request id)])

    def pick(self, logits: torch.Tensor, wanted: list) -> dict[int, int]:
        if wanted:
            self.kept.append((logits.float().numpy().copy(), [(s, b, q, r.id) for s, b, q, r in wanted]))
        return {slot: 0 for slot, _, _, _ in wanted}  # placeholders: the driver picks from the logits


def row_of(msg: tuple) -> Row:
    """A Row from the driver's message (slot, state, token_ids, start, wants_token, blocks, request id): the rank
    sees a request as its id alone (prompt logprobs are not carried to ranks)."""
    slot, state, token_ids, start, wants, blocks, rid = msg
    request = SimpleNamespace(id=rid, spec=SimpleNamespace(prompt_logprobs=None))
    return Row(slot, request, SlotState(state), list(token_ids), start, wants, 0, tuple(blocks))


def load_shard(folder: str, size: int) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM
    from transformers.distributed import DistributedConfig
    from transformers.utils import logging
    logging.set_verbosity_error()
    logging.disable_progress_bar()  # N ranks' "Loading weights" bars would interleave on the lane's stderr
    model = AutoModelForCausalLM.from_pretrained(folder, distributed_config=DistributedConfig(tp_size=size),
                                                 dtype=torch.float32, attn_implementation="sdpa")
    return model.eval()


def rank_main(rank: int, conn, size: int, port: int, folder: str, pool: dict, threads: int) -> None:
    """The rank process: join the group, load its shard, build its runner, answer the driver until "stop"."""
    import torch.distributed as dist
    torch.set_num_threads(threads)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(rank))  # transformers' TP plan reads them
    parent = os.getppid()
    try:
        join_group(rank, size, port, COLLECTIVE_TIMEOUT_S)
        model = load_shard(folder, size)
        cfg = model.config
        lm = LoadedModel(model, None, f"rank{rank}", torch.device("cpu"), torch.float32, frozenset(), pool["pad_id"],
                         decode_step="eager")  # the fast step's fused kernels read whole, unsharded weights
        runner = RankRunner(lm, pool["slots"], pool["num_blocks"], pool["block_size"], pool["host_blocks"],
                            fused=pool["fused"], kv_heads=cfg.num_key_value_heads // size)
        clock = AllReduceClock(list(model.model.layers))
        q = model.model.layers[0].self_attn.q_proj.weight
        local = q.to_local() if hasattr(q, "to_local") else q
        conn.send(("ready", {"kv_bytes": runner.kv_bytes, "q_proj": tuple(local.shape), "pid": os.getpid()}))
    except Exception as e:  # noqa: BLE001 -- said to the driver as one line, then the process ends
        conn.send(("error", f"rank {rank} could not start: {type(e).__name__}: {one_line(e)}"))
        return
    while (msg := next_message(conn, parent)) is not None:
        clock.take()
        t0 = time.perf_counter()
        try:
            if msg[0] == "reference":
                out = runner.reference_ms()
            else:
                _, rows, ops = msg
                runner.kept = []
                runner.run([row_of(r) for r in rows], **ops)
                out = runner.kept if rank == 0 else None
        except Exception as e:  # noqa: BLE001 -- a collective timed out, a peer's socket closed (a rank died mid-step), or a fault of its own: said to the driver
            conn.send(("error", f"rank {rank} failed mid-step: {one_line(e)}"))
            return
        forward_ms = (time.perf_counter() - t0) * 1000
        ms, calls, layers = clock.take()
        conn.send(("done", out, {"forward_ms": forward_ms, "allreduce_ms": ms, "allreduces": calls, "layers": layers}))
    dist.destroy_process_group()
