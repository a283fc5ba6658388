"""One stage of a pipeline-parallel lane: a process holding a run of the model's layers and those layers' K/V.

`stage_main` is the process: it joins the lane's gloo group (torch.distributed, a timeout on every collective), loads
the model and keeps its own layers (stage 0: the embeddings and the first L/p layers; the last stage: its layers, the
final norm and the lm_head; `cut`), builds a paged KV pool of only those layers (the block tables are the lane's,
the same on every stage), and answers the driver's messages on its pipe until told to stop. Each "run" splits every
forward call's rows into micro-batches of equal size (padded with rows that write nothing) and steps them through
torch.distributed.pipelining: a `PipelineStage` over `StageModule` and a forward-only `ScheduleGPipe`, which chunks
the call's inputs, sends each micro-batch's hidden states (B/m, Q, E) to the next stage and receives them there.
The library infers the shapes it sends from a step's first micro-batch and keeps them, so a stage and schedule are
kept per shape (rows per micro-batch, columns, micro-batches). The cache rides beside the activations: the schedule
splits a row-index kwarg with them, so each micro-batch plans its own rows' block tables before its layers run.

Every micro-batch's forward is timed here (perf_counter: CLOCK_MONOTONIC); the driver aligns the clocks. The last
stage sends back the logits of the rows that want a token; the driver picks. What it does not know: requests beyond
their ids, sampling, grammars, logprobs, scheduling.
"""
import os
import time
from typing import NamedTuple

import torch
from torch import nn

from engine.step import SlotState
from engine.worker.kv_cache import PagedKVCache
from engine.worker.linears import additive_mask
from engine.worker.rank_group import join_group, next_message, one_line
from engine.worker.tp_rank import COLLECTIVE_TIMEOUT_S, row_of


MAX_SCHEDULES = 64  # shapes kept (a prefill call's columns vary): past this many the oldest are dropped


class Planned(NamedTuple):
    """One row of a call as its micro-batch plans the cache: where it reads and writes, and what sdpa may skip."""
    table: tuple[int, ...]      # the row's block table (the lane's)
    write: list[int]            # per column, the position its K/V is written at (-1: a padded column, written nowhere)
    kv_len: int                 # positions the row reads
    start: int                  # its first real position
    length: int | None          # its real columns (None: a padding row of an uneven last micro-batch)


def cut(model: nn.Module, stage: int, size: int) -> nn.Module:
    """`model` (a *ForCausalLM) keeping only stage `stage` of `size`'s layers, renumbered from 0 (its cache holds
    only those); the embeddings only on the first stage, the final norm and lm_head only on the last."""
    inner, n = model.model, model.config.num_hidden_layers // size
    inner.layers = nn.ModuleList(inner.layers[stage * n:(stage + 1) * n])
    for i, layer in enumerate(inner.layers):
        layer.self_attn.layer_idx = i
    model.config.num_hidden_layers = n
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = model.config.layer_types[stage * n:(stage + 1) * n]
    if stage > 0:
        inner.embed_tokens = None   # the hidden states arrive from the stage before (a tied lm_head keeps its weight)
    if stage < size - 1:
        inner.norm, model.lm_head = nn.Identity(), None
    return model


class StageModule(nn.Module):
    """The stage's part of a forward call, one micro-batch at a time: x is (b, Q) token ids on the first stage, the
    (b, Q, E) hidden states after it; `idx` (b,) are the micro-batch's rows of the call (`Call`)."""

    def __init__(self, model: nn.Module, first: bool, last: bool, runner: "StageRunner"):
        super().__init__()
        self.model, self.first, self.last, self.runner = model, first, last, runner

    def forward(self, x: torch.Tensor, pos: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        t0 = time.perf_counter()
        mask = self.runner.plan(idx.tolist(), pos)
        kw = {"input_ids": x} if self.first else {"inputs_embeds": x}
        hidden = self.model.model(**kw, position_ids=pos, attention_mask=mask, cache=self.runner.cache,
                                  use_cache=True).last_hidden_state  # (b, Q, E)
        out = self.model.lm_head(hidden[:, -1]) if self.last else hidden  # (b, V): every row's last column
        self.runner.spans.append((self.runner.call_index, len(self.runner.spans_of_call()), t0, time.perf_counter()))
        return out


class StageRunner:
    """A stage's KV pool and its pipeline schedules; `run` computes one step's calls, micro-batch by micro-batch."""

    def __init__(self, model: nn.Module, stage: int, size: int, pool: dict, kv_heads: int, head_dim: int):
        self.stage, self.size, self.pad_id = stage, size, pool["pad_id"]
        self.cache = PagedKVCache(model.config.num_hidden_layers, pool["num_blocks"], pool["block_size"], kv_heads,
                                  head_dim, torch.float32, "cpu", pool["host_blocks"])
        self.module = StageModule(model, stage == 0, stage == size - 1, self)
        self.sdpa = model.config._attn_implementation == "sdpa"
        self.width, self.vocab = model.config.hidden_size, model.config.vocab_size
        self.schedules: dict[tuple[int, int, int], object] = {}
        self.spans: list[tuple[int, int, float, float]] = []   # (call, micro-batch, start, end) perf_counter seconds
        self.call_index, self.rows = 0, []  # rows: the call's Planned rows, padding rows last

    def spans_of_call(self) -> list:
        return [s for s in self.spans if s[0] == self.call_index]

    def schedule(self, per: int, q: int, m: int):
        """The forward-only GPipe schedule of m micro-batches of `per` rows of `q` columns, made once per shape. Its
        stage is given the shapes it receives and sends (static mode): inferring them instead would run the first
        micro-batch once more, writing and timing a forward that is not the step's."""
        from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
        key = (per, q, m)
        if key not in self.schedules:
            if len(self.schedules) >= MAX_SCHEDULES:
                del self.schedules[next(iter(self.schedules))]
            module, hidden = self.module, torch.empty(per, q, self.width)
            given = torch.empty(per, q, dtype=torch.long) if module.first else hidden
            sent = torch.empty(per, self.vocab) if module.last else hidden
            stage = PipelineStage(module, self.stage, self.size, torch.device("cpu"), input_args=(given,),
                                  output_args=(sent,))
            self.schedules[key] = ScheduleGPipe(stage, n_microbatches=m)
        return self.schedules[key]

    def plan(self, idx: list[int], pos: torch.Tensor):
        """Plan the cache for rows `idx` of the call (a micro-batch); its attention mask (None where sdpa needs none)."""
        rows = [self.rows[i] for i in idx]
        kv_len = max(r.kv_len for r in rows)
        self.cache.plan([r.table for r in rows], [r.write for r in rows], kv_len)
        q = pos.shape[1]
        same = len({r.start for r in rows}) == 1 and all(r.length == q for r in rows)
        if self.sdpa and same and (q == 1 or rows[0].start == 0):
            return None  # every row reads one token, or its whole prompt from position 0: as ModelRunner.needs_mask
        visible = torch.arange(kv_len) <= pos[:, :, None]  # (b, Q, kv_len)
        return additive_mask(visible, torch.float32)[:, None]

    @torch.no_grad()
    def call(self, rows: list, m: int) -> list:
        """One forward call over `rows` in min(m, rows) micro-batches; the last stage's [(logits (W, V), wanted)]."""
        rows = sorted(rows, key=lambda r: r.slot)
        q = max(len(r.token_ids) for r in rows)
        m = min(m, len(rows))
        per = -(-len(rows) // m)
        ids, pos, self.rows = [], [], []
        for r in rows:
            pad = q - len(r.token_ids)
            real = list(range(r.start, r.start + len(r.token_ids)))
            ids.append([self.pad_id] * pad + r.token_ids)
            pos.append([0] * pad + real)
            self.rows.append(Planned(r.blocks, [-1] * pad + real, r.start + len(r.token_ids), r.start, len(r.token_ids)))
        for _ in range(per * m - len(rows)):  # a row that writes nothing and reads its table's position 0
            ids.append([self.pad_id] * q)
            pos.append([0] * q)
            self.rows.append(Planned((0,), [-1] * q, 1, 0, None))
        ids, pos = torch.tensor(ids), torch.tensor(pos)  # (B', Q)
        idx = torch.arange(len(ids))
        schedule = self.schedule(per, q, m)
        out = schedule.step(ids, pos=pos, idx=idx) if self.stage == 0 else schedule.step(pos=pos, idx=idx)
        if self.stage < self.size - 1:
            return []
        wanted = [(r.slot, b, -1, r.request.id) for b, r in enumerate(rows) if r.wants_token]
        if not wanted:
            return []
        return [(out[[w[1] for w in wanted]].numpy().copy(), wanted)]

    def run(self, rows: list, ops: dict, m: int) -> list:
        """A step: the block copies, then a prefill call and a decode call (or one of either), each in micro-batches."""
        self.cache.apply(ops["swap_out"], ops["swap_in"], ops["copies"])
        self.spans = []
        prefills = [r for r in rows if r.state is SlotState.PREFILL]
        decodes = [r for r in rows if r.state is not SlotState.PREFILL]
        kept = []
        for self.call_index, call in enumerate(c for c in (prefills, decodes) if c):
            kept += self.call(call, m)
        return kept


def stage_main(stage: int, conn, size: int, port: int, folder: str, pool: dict, threads: int) -> None:
    """The stage process: join the group, load its layers, build its runner, answer the driver until "stop"."""
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging
    torch.set_num_threads(threads)
    parent = os.getppid()
    try:
        join_group(stage, size, port, COLLECTIVE_TIMEOUT_S)
        logging.set_verbosity_error()
        logging.disable_progress_bar()
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="sdpa").eval()
        cfg = model.config
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        layers = (stage * cfg.num_hidden_layers // size, (stage + 1) * cfg.num_hidden_layers // size)
        runner = StageRunner(cut(model, stage, size), stage, size, pool, cfg.num_key_value_heads, head_dim)
        conn.send(("ready", {"kv_bytes": runner.cache.kv_bytes, "layers": layers, "pid": os.getpid()}))
    except Exception as e:  # noqa: BLE001 -- said to the driver as one line, then the process ends
        conn.send(("error", f"stage {stage} could not start: {type(e).__name__}: {one_line(e)}"))
        return
    while (msg := next_message(conn, parent)) is not None:
        if msg[0] == "clock":  # the driver aligns this process's clock with its own
            conn.send(("done", time.perf_counter()))
            continue
        try:
            _, rows, ops, m = msg
            kept = runner.run([row_of(r) for r in rows], ops, m)
        except Exception as e:  # noqa: BLE001 -- a send/recv timed out, a peer's socket closed (a stage died mid-step), or a fault of its own
            conn.send(("error", f"stage {stage} failed mid-step: {one_line(e)}"))
            return
        conn.send(("done", kept, runner.spans))
    dist.destroy_process_group()
