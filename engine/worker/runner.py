"""The model runner computes the rows a scheduler decided on and returns one token per row that wants one.

`ModelRunner` runs a real model over a paged KV cache (`kv_cache.PagedKVCache`): each row feeds its tokens at its own
positions, read and written through its block table (`Row.blocks`, the scheduler's), left-padded to the longest row
of the call with explicit `position_ids`, and the logit is read at the last column, where every row's last real token
sits. Padded query positions attend to their row's position 0 and write nothing, so they can neither produce NaN nor
touch real K/V. Before the forward `run` applies the step's block copies (swap out, swap in, copy-on-write), timed. On CPU
its calls compute the model's linear layers with oneDNN-packed copies of their weights (`packed_linears`).
A decode call (one token a row) goes through `fast_decode.FastDecode` where the model allows (CUDA graphs on a GPU,
the compiled few-row linear on a CPU), and so does a fused runner's packed call on the compiled CPU path (each
token a row; not a call with a prompt-logprobs row); every other call through transformers' forward.
The packing lives in `linears.py`, sampling in `sampling.py`; `sim.SimRunner` is the same interface without a
model. Runners know rows and slots, never policies.
"""
import contextlib
import time
import weakref

import torch

from engine.sched.batch import ForwardResult, Row, call_kind
from engine.worker.fast_decode import FastDecode, unsupported
from engine.worker.kv_cache import PagedKVCache
from engine.worker.linears import additive_mask, can_pack, packed_linears
from engine.worker.model import LoadedModel
from engine.request import Request
from engine.worker.cpu import kernels as cpu_kernels
from engine.worker.detok import next_text
from engine.worker import grammar
from engine.worker.logprobs import note_prompt, note_written
from engine.worker.sampling import sample_rows
from engine.sched.speculative import accept
from engine.step import Forward, SlotState


_REFERENCE_MS: "weakref.WeakKeyDictionary[torch.nn.Module, dict[str, float]]" = weakref.WeakKeyDictionary()


def table_of(row: Row) -> tuple[int, ...]:
    """The block table `row` reads and writes through (the scheduler's `Row.blocks`)."""
    assert row.blocks, f"a row of {row.request.id} without a block table"
    return row.blocks


class ModelRunner:
    simulated = False

    def __init__(self, lm: LoadedModel, slots: int, num_blocks: int, block_size: int = 16, host_blocks: int = 0,
                 fused: bool = False, kv_heads: int | None = None):
        cfg = lm.model.config
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.lm = lm
        self.fused = fused
        self.packed = can_pack(lm.model, lm.device)
        # kv_heads: a tensor-parallel rank's own share of the model's K/V heads (its pool holds only those)
        self.cache = PagedKVCache(cfg.num_hidden_layers, num_blocks, block_size, kv_heads or cfg.num_key_value_heads,
                                  head_dim, lm.dtype, lm.device, host_blocks)
        # decode calls (one token a row) go through our own step where the model allows; everything else, and
        # every call of a model it cannot run, through transformers' forward
        self.fast = FastDecode(lm.model, self.cache, self.packed, slots) \
            if lm.decode_step == "fast" and unsupported(lm.model) is None else None
        if self.fast is not None and self.fast.graphed:  # CUDA graphs of this pool before the lane's first step
            self.fast.capture_all(max(1, num_blocks // slots))

    @property
    def compiled_packs(self) -> bool:
        """Whether packed calls run on the compiled CPU step (float32, the extension loaded), each token a row."""
        return self.fast is not None and self.fast.ops is not None

    @property
    def kv_bytes(self) -> int:
        """Bytes of this runner's device K/V tensors: exactly its blocks."""
        return self.cache.kv_bytes

    @property
    def block_bytes(self) -> int:
        """Bytes of one KV block (every layer, K and V): what a P/D hand-off copies per block."""
        return self.cache.block_bytes

    def export_blocks(self, blocks: list[int], out: memoryview) -> None:
        """A P/D hand-off's send: `blocks`' K/V into `out` (block_bytes each, block after block)."""
        self.cache.export_blocks(blocks, out)

    def import_blocks(self, blocks: list[int], data: memoryview) -> None:
        """A P/D hand-off's receive: `data` (export_blocks' layout) into `blocks` of this runner's pool."""
        self.cache.import_blocks(blocks, data)

    def run(self, rows: list[Row], swap_out=(), swap_in=(), copies=()) -> ForwardResult:
        prefills = [r for r in rows if r.state is SlotState.PREFILL]
        decodes = [r for r in rows if r.state is not SlotState.PREFILL]
        fused = bool(self.fused and prefills and decodes)
        calls = [rows] if fused or not prefills or not decodes else [prefills, decodes]
        kind = Forward.FUSED if fused else call_kind(len(calls), bool(prefills))
        tokens = {}
        copy_ms = self.cache.apply(swap_out, swap_in, copies)  # before the forward reads the blocks
        if not rows:
            return ForwardResult(tokens, 0.0, Forward.NONE, copy_ms=copy_ms)
        t0 = time.perf_counter()
        # on the compiled CPU path a fused runner packs every call with prompt tokens (no padding), as vLLM does
        packs = fused or self.fused and bool(prefills) and self.compiled_packs
        for call in calls:
            tokens.update(self.forward_packed(call) if packs else self.forward(call))
        for row in rows:  # a speculative row: keep the proposals the model agrees with, then its own token
            if row.proposed:
                tokens[row.slot] = accept(row.token_ids[1:], tokens[row.slot])
        if self.lm.device.type == "cuda":
            torch.cuda.synchronize()
        return ForwardResult(tokens, (time.perf_counter() - t0) * 1000, kind, copy_ms=copy_ms)

    @torch.inference_mode()
    def forward(self, rows: list[Row]) -> dict[int, int]:
        """One forward over `rows`, left-padded; the greedy token of every row that wants one, by slot."""
        Q = max(len(r.token_ids) for r in rows)
        pad_id = self.lm.pad_id
        batch = sorted([(r.slot, r) for r in rows], key=lambda b: b[0])
        ids, pos, write, tables = [], [], [], []
        for slot, r in batch:
            tables.append(table_of(r))
            pad = Q - len(r.token_ids)
            real = list(range(r.start, r.start + len(r.token_ids)))
            assert real[-1] < len(tables[-1]) * self.cache.block_size, "row longer than its block table"
            ids.append([pad_id] * pad + r.token_ids)
            pos.append([0] * pad + real)   # pad queries sit at position 0 and attend to their row's position 0
            write.append([-1] * pad + real)  # ...and write nothing
        kv_len = max(r.start + len(r.token_ids) for r in rows)
        # left padding puts every row's last token at column -1 (a speculative row wants its last proposed + 1)
        wanted = [(slot, b, q, r.request) for b, (slot, r) in enumerate(batch) if r.wants_token
                  for q in range(-1 - r.proposed, 0)]
        scores = [(b, Q - len(r.token_ids), len(r.token_ids), r.start, r.request) for b, (_, r) in enumerate(batch)
                  if r.state is SlotState.PREFILL and r.request.spec.prompt_logprobs is not None]
        if Q == 1 and self.fast is not None and not scores:
            logits = self.fast.decode([i[0] for i in ids], [p[0] for p in pos], [True] * len(ids), tables, kv_len,
                                      self.needs_mask(rows, 1), [b for _, b, _, _ in wanted])
            return self.pick(logits, wanted)
        device = self.lm.device
        self.cache.plan(tables, write, kv_len)
        ids = torch.tensor(ids, device=device)                        # (B, Q)
        pos = torch.tensor(pos, device=device)                        # (B, Q)
        return self.compute(ids, pos, self.mask(rows, pos, kv_len), wanted, scores)

    @torch.inference_mode()
    def forward_packed(self, rows: list[Row]) -> dict[int, int]:
        """One forward over `rows` packed into a single sequence, without padding (the fused step: a joiner's
        whole prompt beside others' single decode tokens). On the compiled CPU path each token is a row of the
        fast step (8 decoders at 128 positions beside a 64-token prompt: 107 ms, through transformers 235, on an
        AMD EPYC). Otherwise through transformers: each token keeps its row's position, a block-diagonal causal mask
        keeps the rows apart, and each layer reads the rows' K/V one after another."""
        ids, pos, wanted, scores = [], [], [], []
        for r in rows:
            n, kv = len(r.token_ids), r.start + len(r.token_ids)
            assert kv <= len(table_of(r)) * self.cache.block_size, "row longer than its block table"
            ids += r.token_ids
            pos += range(r.start, kv)
            if r.wants_token:
                wanted += [(r.slot, 0, len(ids) - 1 - q, r.request) for q in range(r.proposed, -1, -1)]
            if r.state is SlotState.PREFILL and r.request.spec.prompt_logprobs is not None:
                scores.append((0, len(ids) - n, n, r.start, r.request))
        if self.compiled_packs and not scores:  # (a prompt-logprobs row needs every prompt position's hidden state)
            # each token a row of the compiled step: it writes its K/V, then reads its request's positions [0, pos]
            # through the request's table in place (no gather, no (M, T) mask)
            tables = [table_of(r) for r in rows for _ in r.token_ids]
            logits = self.fast.decode(ids, pos, [True] * len(ids), tables, max(pos) + 1, True, [w[2] for w in wanted])
            return self.pick(logits, wanted)
        # each query token's row, and every row's K/V positions one row after another (what the mask compares)
        q_row = [i for i, r in enumerate(rows) for _ in r.token_ids]
        k_row = [i for i, r in enumerate(rows) for _ in range(r.start + len(r.token_ids))]
        read_pos = [p for r in rows for p in range(r.start + len(r.token_ids))]
        device = self.lm.device
        pos, read_pos = torch.tensor(pos, device=device), torch.tensor(read_pos, device=device)  # (M,), (T,)
        visible = (torch.tensor(q_row, device=device)[:, None] == torch.tensor(k_row, device=device)) \
            & (read_pos <= pos[:, None])  # (M, T): same row, key not after the query
        mask = additive_mask(visible, self.lm.dtype)[None, None]  # (1, 1, M, T)
        self.cache.plan_packed([table_of(r) for r in rows], [r.start for r in rows],
                               [len(r.token_ids) for r in rows])
        return self.compute(torch.tensor([ids], device=device), pos[None], mask, wanted, scores)

    def compute(self, ids: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor | None,
                wanted: list[tuple[int, int, int, Request]], scores: list = ()) -> dict[int, int]:
        """The decoder over ids and pos (B, Q) as planned in the cache, then the next token of each
        (slot, batch row, column, request) in `wanted`, by slot (a slot wanted at several columns, in
        column order: the list of their greedy tokens). `scores`: (batch row, first column, columns, first
        position, request) of prefill chunks whose prompt tokens' logprobs were asked for (echo)."""
        with packed_linears(self.lm.model) if self.packed else contextlib.nullcontext():
            hidden = self.lm.model.model(input_ids=ids, position_ids=pos, attention_mask=mask,
                                         cache=self.cache, use_cache=True).last_hidden_state  # (B, Q, E)
            for b, q0, n, start, request in scores:
                note_prompt(self.lm.model.lm_head, hidden[b, q0:q0 + n], request, start)
            if not wanted:
                return {}
            _, b, q, _ = zip(*wanted)
            logits = self.lm.model.lm_head(hidden[list(b), list(q)])  # (W, V)
        return self.pick(logits, wanted)

    def pick(self, logits: torch.Tensor, wanted: list[tuple[int, int, int, Request]]) -> dict[int, int]:
        """The next token of each wanted row from its logits (W, V): greedy, or sampled as its request asks."""
        if not wanted:
            return {}
        raw, logits = logits, grammar.mask(self.hold_eos(logits, wanted), wanted, self.lm)
        chosen = cpu_kernels.argmax(logits).tolist()
        sampled = [i for i, w in enumerate(wanted) if w[3].spec.temperature != 0]
        if sampled:
            rows = logits[torch.tensor(sampled, device=logits.device)] if len(sampled) < len(wanted) else logits
            for i, token in zip(sampled, sample_rows(rows, [wanted[i][3] for i in sampled])):
                chosen[i] = token
        tokens = {}
        for (slot, _, _, _), token in zip(wanted, chosen):
            tokens.setdefault(slot, []).append(token)
        note_written(raw, wanted, chosen)  # only rows whose request asked for logprobs
        grammar.advance(wanted, chosen)    # only rows whose request keeps to a grammar
        return {slot: t if len(t) > 1 else t[0] for slot, t in tokens.items()}

    def hold_eos(self, logits: torch.Tensor, wanted: list[tuple[int, int, int, Request]]) -> torch.Tensor:
        """The logits with EOS masked on the rows of requests still short of their min_tokens (as vLLM does: the
        request writes another token rather than stopping); the same tensor when no row needs it."""
        short = [i for i, w in enumerate(wanted) if len(w[3].output_ids) < w[3].spec.min_tokens]
        if not short or not self.lm.eos_ids:
            return logits
        logits = logits.clone()
        logits[torch.tensor(short, device=logits.device)[:, None], torch.tensor(sorted(self.lm.eos_ids), device=logits.device)] = float("-inf")
        return logits

    def mask(self, rows: list[Row], pos: torch.Tensor, kv_len: int) -> torch.Tensor | None:
        """The (B, 1, Q, kv_len) additive attention mask, or None where none is needed: every row has the same
        length and either reads one token or its whole prompt from position 0. transformers then lets sdpa
        run unmasked (decode) or with is_causal (prefill), as generate() does for a lone request."""
        if not self.needs_mask(rows, pos.shape[1]):
            return None
        visible = torch.arange(kv_len, device=pos.device) <= pos[:, :, None]  # (B, Q, kv_len): key k visible to query q
        return additive_mask(visible, self.lm.dtype)[:, None]

    def needs_mask(self, rows: list[Row], Q: int) -> bool:
        return not (self.lm.model.config._attn_implementation == "sdpa"
                    and all(r.start == rows[0].start and len(r.token_ids) == Q for r in rows)
                    and (Q == 1 or rows[0].start == 0))

    def is_special(self, token_id: int) -> bool:
        return token_id in self.lm.special_ids

    def reference_ms(self) -> float:
        """A one-row decode step of this model, in ms (timed once per model and decode path, with the runner's own
        linears): what a step that computes nothing lasts on a lane that has not measured a step of its own yet."""
        model, path = self.lm.model, "fast" if self.fast is not None else "eager"
        known = _REFERENCE_MS.setdefault(model, {})
        if path not in known:
            x = torch.tensor([[self.lm.pad_id]], device=self.lm.device)
            # the fast call reads block 0's first position and writes nothing
            call = (lambda: self.fast.decode([self.lm.pad_id], [0], [False], [(0,)], 1, False, [0])) \
                if self.fast is not None else (lambda: model(x))
            times = []
            with torch.inference_mode(), packed_linears(model) if self.packed else contextlib.nullcontext():
                for _ in range(3):
                    t0 = time.perf_counter()
                    call()
                    if self.lm.device.type == "cuda":
                        torch.cuda.synchronize()
                    times.append((time.perf_counter() - t0) * 1000)
            known[path] = sorted(times)[1]
        return known[path]

    def text_delta(self, request: Request, upto: int | None = None, final: bool = False) -> str:
        """The text `request`'s newest tokens (those before `upto`) add to its response: only those few tokens are
        decoded (engine.worker.detok); empty while a UTF-8 character is incomplete, unless `final`."""
        ids = request.output_ids if upto is None else request.output_ids[:upto]
        delta, request.text_prefix, request.text_read = next_text(self.decode_text, ids, request.text_prefix,
                                                                  request.text_read, final)
        request.text += delta
        return delta

    def decode_text(self, ids: list[int]) -> str:
        return self.lm.tokenizer.decode(ids, clean_up_tokenization_spaces=False)
