"""Runners compute the rows a scheduler decided on and return one greedy token per row that wants one.

`ModelRunner` runs a real model over a per-slot KV cache: each row feeds its tokens at its own cache
positions, left-padded to the longest row of the call with explicit `position_ids`, and the logit
is read at the last column, where every row's last real token sits. Padded query positions attend to
column 0 and write to the scratch column, so they can neither produce NaN nor touch real K/V. On CPU
its calls compute the model's linear layers with oneDNN-packed copies of their weights (`packed_linears`).
A decode call (one token a row) goes through `fast_decode.FastDecode` where the model allows (CUDA graphs on a GPU,
the compiled few-row linear on a CPU), every other call through transformers' forward.
`SimRunner` needs no model: every token is a placeholder and every step costs what a simple cost model says.
Runners know rows and slots, never policies.
"""
import contextlib
import functools
import math
import time
import weakref
from dataclasses import dataclass

import torch

from .block_store import BlockStore
from .cpu_kernels import MAX_ROWS
from .fast_decode import FastDecode, unsupported
from .kv_cache import SlotKVCache
from .model import LoadedModel
from .request import Request
from .scheduler import Row
from .speculative import accept
from .step import Forward, SlotState


@dataclass
class ForwardResult:
    tokens: dict[int, int | list[int] | None]  # slot -> sampled token id (a speculative row: the tokens it writes)
    forward_ms: float              # time inside forward calls (synchronized on CUDA)
    forward: Forward               # which calls: NONE, PREFILL, DECODE, SPLIT (two calls) or FUSED (one call, both kinds)
    filler_slots: tuple[int, ...] = ()  # idle slots computed as throwaway rows to speed a decode call up


def call_kind(calls: int, prefills: bool) -> Forward:
    """What an unfused step's calls were: a prefill call and a decode call, or one of either kind."""
    return Forward.SPLIT if calls == 2 else Forward.PREFILL if prefills else Forward.DECODE


# A filler row costs about as much as gathering this many K/V tokens (rows x length) of the real rows
# (measured here: filling 1 gap among 6 rows lost 10% at 100 tokens a row and won 5% at 400).
FILLER_KV_TOKENS = 1000


def additive_mask(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """0 where a key is visible to a query, -inf where not: built once per call (sdpa would convert a bool
    mask in every layer)."""
    return torch.zeros(visible.shape, dtype=dtype, device=visible.device).masked_fill_(~visible, -math.inf)


def padded_rows(n: int) -> int:
    """Rows worth computing for `n` rows: on CPU a 2-row decode step costs more than a 4-row one (measured
    here, packed linears: 1-4 rows 64, 74, 63, 62 ms; then ~3.5 ms a row, 8 rows 78, 16 rows 102)."""
    return 4 if n == 2 else n


_REFERENCE_MS: "weakref.WeakKeyDictionary[torch.nn.Module, dict[str, float]]" = weakref.WeakKeyDictionary()
_PACKED: dict[int, tuple[weakref.ref, int, torch.Tensor]] = {}  # id(weight) -> (its ref, its version, packed)


def packed_weight(weight: torch.Tensor) -> torch.Tensor:
    """A oneDNN-packed copy of a linear layer's weight, made once and kept while the weight lives unchanged."""
    ref, version, packed = _PACKED.get(id(weight), (None, None, None))
    if ref is None or ref() is not weight or version != weight._version:
        packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach())
        _PACKED[id(weight)] = (weakref.ref(weight, lambda _, key=id(weight): _PACKED.pop(key, None)),
                               weight._version, packed)
    return packed


def packed_linear(module: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed_weight(module.weight), module.bias, "none", [], "")


def can_pack(model: torch.nn.Module, device: torch.device) -> bool:
    """Whether `packed_linears` applies: float32 on a CPU with oneDNN (the case measured; CUDA has no such gap)."""
    return device.type == "cpu" and torch.backends.mkldnn.is_available() and model.dtype == torch.float32


@contextlib.contextmanager
def packed_linears(model: torch.nn.Module):
    """While inside, every nn.Linear of `model` computes with its oneDNN-packed weight. On CPU, MKL's sgemm
    behind F.linear reads the weights slowly for a few rows: all of SmolLM2's decoder linears took
    67-80 ms for 2-16 rows (measured here, weights streamed from memory), the packed ones 37-41 ms; the
    49152 x 576 lm_head 26-58 ms for 2-8 rows, packed 7-12 ms. The packed copies cost memory once
    (as much as the weights); the model itself is left as it was, for generate() and everyone else."""
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear and "forward" not in m.__dict__]  # not hooked
    for m in linears:
        m.forward = functools.partial(packed_linear, m)
    try:
        yield
    finally:
        for m in linears:
            del m.forward


class ModelRunner:
    simulated = False

    def __init__(self, lm: LoadedModel, slots: int, row_len: int, fused: bool = False, block_size: int = 16):
        cfg = lm.model.config
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.lm = lm
        self.fused = fused
        self.packed = can_pack(lm.model, lm.device)
        self.cache = SlotKVCache(cfg.num_hidden_layers, slots, cfg.num_key_value_heads, row_len, head_dim,
                                 lm.dtype, lm.device)
        # decode calls (one token a row) go through our own step where the model allows; everything else, and
        # every call of a model it cannot run, through transformers' forward
        self.fast = FastDecode(lm.model, self.cache, self.packed) \
            if lm.decode_step == "fast" and unsupported(lm.model) is None else None
        if self.fast is not None and self.fast.graphed:
            self.fast.capture_all()  # CUDA graphs of this cache, before the lane's first step: no step pays for them
        self.store = BlockStore(block_size)  # the prefix cache's blocks (used only by a lane with prefix_cache)

    def run(self, rows: list[Row]) -> ForwardResult:
        prefills = [r for r in rows if r.state is SlotState.PREFILL]
        decodes = [r for r in rows if r.state is not SlotState.PREFILL]
        fused = bool(self.fused and prefills and decodes)
        calls = [rows] if fused or not prefills or not decodes else [prefills, decodes]
        kind = Forward.FUSED if fused else call_kind(len(calls), bool(prefills))
        tokens, fillers = {}, []
        t0 = time.perf_counter()
        self.store.load(self.cache, rows)  # prefix cache hits: their cached K/V into the rows first
        for call in calls:
            if fused:
                tokens.update(self.forward_packed(call))
            else:
                fillers = self.fillers(call) if call is decodes or not prefills else []
                tokens.update(self.forward(call, fillers))
        self.store.save(self.cache, rows)  # new full prompt blocks of the prefix cache, out of the rows
        for row in rows:  # a speculative row: keep the proposals the model agrees with, then its own token
            if row.proposed:
                tokens[row.slot] = accept(row.token_ids[1:], tokens[row.slot])
        if self.lm.device.type == "cuda":
            torch.cuda.synchronize()
        return ForwardResult(tokens, (time.perf_counter() - t0) * 1000, kind, tuple(fillers))

    def fillers(self, rows: list[Row]) -> list[int]:
        """Idle slots to compute beside a decode call's rows, each feeding one pad token that writes only to
        the scratch column: enough for `padded_rows`, and to make the call's slots one contiguous run, so
        that every layer's K/V is a view of the cache rather than a gathered copy. A gap is filled only
        while its extra rows cost less than gathering the real rows' K/V."""
        if self.lm.device.type != "cpu":
            return []  # a CPU trick (MKL's few-row anomaly, gathered K/V copies): CUDA has neither
        if self.fast is not None and self.fast.w.kernel is not None and len(rows) <= MAX_ROWS:
            return []  # few_row_linear computes 1-4 rows faster than oneDNN computes 4
        slots = sorted(r.slot for r in rows)
        taken, num_slots = set(slots), self.cache.slots
        lo, width = slots[0], slots[-1] + 1 - slots[0]
        kv_len = max(r.start + len(r.token_ids) for r in rows)
        extra = padded_rows(width) - padded_rows(len(rows))
        if width > len(rows) and extra * FILLER_KV_TOKENS > len(rows) * kv_len:
            return []  # a wide gap over short rows: gather their K/V (padding a gathered call did not pay)
        n = min(padded_rows(width), num_slots)
        hi = min(num_slots, lo + n)
        return [s for s in range(hi - n, hi) if s not in taken]

    @torch.inference_mode()
    def forward(self, rows: list[Row], fillers: list[int] = ()) -> dict[int, int]:
        """One forward over `rows` (plus idle `fillers` slots that feed a pad token and write only to the
        scratch column); the greedy token of every row that wants one, by slot."""
        Q = max(len(r.token_ids) for r in rows)
        scratch = self.cache.scratch
        pad_id = self.lm.pad_id
        batch = sorted([(r.slot, r) for r in rows] + [(s, None) for s in fillers], key=lambda b: b[0])
        ids, pos, write = [], [], []
        for _, r in batch:
            if r is None:  # a filler: a pad token at position 0, attending to column 0, written to scratch
                ids.append([pad_id] * Q)
                pos.append([0] * Q)
                write.append([scratch] * Q)
                continue
            pad = Q - len(r.token_ids)
            real = list(range(r.start, r.start + len(r.token_ids)))
            assert real[-1] < scratch, "row longer than the KV cache row"
            ids.append([pad_id] * pad + r.token_ids)
            pos.append([0] * pad + real)          # pad queries sit at position 0 and attend to column 0
            write.append([scratch] * pad + real)  # ...and write their K/V to the scratch column
        kv_len = max(r.start + len(r.token_ids) for r in rows)
        # left padding puts every row's last token at column -1 (a speculative row wants its last proposed + 1)
        wanted = [(slot, b, q, r.request) for b, (slot, r) in enumerate(batch) if r is not None and r.wants_token
                  for q in range(-1 - r.proposed, 0)]
        if Q == 1 and self.fast is not None:
            logits = self.fast.decode([i[0] for i in ids], [p[0] for p in pos], [w[0] for w in write],
                                      [slot for slot, _ in batch], kv_len, self.needs_mask(rows, fillers, 1),
                                      [b for _, b, _, _ in wanted])
            return self.pick(logits, wanted)
        device = self.lm.device
        ids = torch.tensor(ids, device=device)                        # (B, Q)
        pos = torch.tensor(pos, device=device)                        # (B, Q)
        self.cache.plan([slot for slot, _ in batch], torch.tensor(write), kv_len)
        return self.compute(ids, pos, self.mask(rows, fillers, pos, kv_len), wanted)

    @torch.inference_mode()
    def forward_packed(self, rows: list[Row]) -> dict[int, int]:
        """One forward over `rows` packed into a single sequence, without padding (the fused step: a joiner's
        whole prompt beside others' single decode tokens). Each token keeps its row's position; a
        block-diagonal causal mask keeps the rows apart, and each layer reads the rows' K/V one after another."""
        ids, pos, slots, q_row, read_slots, read_pos, k_row, wanted = [], [], [], [], [], [], [], []
        for i, r in enumerate(rows):
            n, kv = len(r.token_ids), r.start + len(r.token_ids)
            assert kv <= self.cache.scratch, "row longer than the KV cache row"
            ids += r.token_ids
            pos += range(r.start, kv)
            slots += [r.slot] * n
            q_row += [i] * n
            read_slots += [r.slot] * kv
            read_pos += range(kv)
            k_row += [i] * kv
            if r.wants_token:
                wanted += [(r.slot, 0, len(ids) - 1 - q, r.request) for q in range(r.proposed, -1, -1)]
        device = self.lm.device
        pos, read_pos = torch.tensor(pos, device=device), torch.tensor(read_pos, device=device)  # (M,), (T,)
        visible = (torch.tensor(q_row, device=device)[:, None] == torch.tensor(k_row, device=device)) \
            & (read_pos <= pos[:, None])  # (M, T): same row, key not after the query
        mask = additive_mask(visible, self.lm.dtype)[None, None]  # (1, 1, M, T)
        self.cache.plan_packed(torch.tensor(slots), pos, torch.tensor(read_slots), read_pos)
        return self.compute(torch.tensor([ids], device=device), pos[None], mask, wanted)

    def compute(self, ids: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor | None,
                wanted: list[tuple[int, int, int, Request]]) -> dict[int, int]:
        """The decoder over ids and pos (B, Q) as planned in the cache, then the next token of each
        (slot, batch row, column, request) in `wanted`, by slot (a slot wanted at several columns, in
        column order: the list of their greedy tokens)."""
        with packed_linears(self.lm.model) if self.packed else contextlib.nullcontext():
            hidden = self.lm.model.model(input_ids=ids, position_ids=pos, attention_mask=mask,
                                         cache=self.cache, use_cache=True).last_hidden_state  # (B, Q, E)
            if not wanted:
                return {}
            _, b, q, _ = zip(*wanted)
            logits = self.lm.model.lm_head(hidden[list(b), list(q)])  # (W, V)
        return self.pick(logits, wanted)

    def pick(self, logits: torch.Tensor, wanted: list[tuple[int, int, int, Request]]) -> dict[int, int]:
        """The next token of each wanted row from its logits (W, V): greedy, or sampled as its request asks."""
        if not wanted:
            return {}
        greedy = logits.argmax(-1).tolist()
        tokens = {}
        for i, (slot, _, _, r) in enumerate(wanted):
            tokens.setdefault(slot, []).append(greedy[i] if r.spec.temperature == 0 else sample(logits[i], r, self.lm.device))
        return {slot: t if len(t) > 1 else t[0] for slot, t in tokens.items()}

    def mask(self, rows: list[Row], fillers: list[int], pos: torch.Tensor, kv_len: int) -> torch.Tensor | None:
        """The (B, 1, Q, kv_len) additive attention mask, or None where none is needed: every row has the same
        length and either reads one token or its whole prompt from position 0. transformers then lets sdpa
        run unmasked (decode) or with is_causal (prefill), as generate() does for a lone request."""
        if not self.needs_mask(rows, fillers, pos.shape[1]):
            return None
        visible = torch.arange(kv_len, device=pos.device) <= pos[:, :, None]  # (B, Q, kv_len): key k visible to query q
        return additive_mask(visible, self.lm.dtype)[:, None]

    def needs_mask(self, rows: list[Row], fillers: list[int], Q: int) -> bool:
        return not (self.lm.model.config._attn_implementation == "sdpa" and not fillers
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
            scratch = self.cache.scratch  # the fast call writes to slot 0's scratch column and reads its column 0
            call = (lambda: self.fast.decode([self.lm.pad_id], [0], [scratch], [0], 1, False, [0])) \
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

    def text_delta(self, request: Request, upto: int | None = None) -> str:
        """The text `request`'s newest tokens (those before `upto`) add to its response (empty while a UTF-8
        character is incomplete)."""
        full = self.lm.tokenizer.decode(request.output_ids[:upto], clean_up_tokenization_spaces=False)
        if full.endswith("\ufffd"):
            return ""
        delta, request.text = full[len(request.text):], full
        return delta


def sample(logits: torch.Tensor, request: Request, device: torch.device) -> int:
    """A token drawn from softmax(logits / temperature), cut to the top_p nucleus, with the request's own
    generator (seeded by its `seed`, else at random): a seeded request draws the same tokens whatever else
    shares its batch, since nothing else touches its generator."""
    spec = request.spec
    if request.rng is None:
        request.rng = torch.Generator(device=device)
        if spec.seed is None:
            request.rng.seed()
        else:
            request.rng.manual_seed(spec.seed)
    probs = torch.softmax(logits.float() / spec.temperature, dim=-1)  # (V,)
    probs, order = probs.sort(descending=True)
    if spec.top_p < 1.0:
        keep = probs.cumsum(-1) - probs < spec.top_p  # tokens before the nucleus is full, and the one that fills it
        probs = probs * keep
    return int(order[torch.multinomial(probs, 1, generator=request.rng)])


SIM_TOKEN = -1  # the simulator's placeholder token id
# The simulator's cost model, a rough straight line through this CPU's measured steps (float32, 2 cores): every
# forward call reads all the weights (~60 ms), and each token position it computes adds ~1.5 ms (a prefill
# of 400 tokens ~0.66 s; a decode call of 16 rows ~85 ms). Rows of a call are padded to its longest.
SIM_CALL_MS = 60.0
SIM_TOKEN_MS = 1.5


def sim_call_ms(rows: list[Row]) -> float:
    return SIM_CALL_MS + SIM_TOKEN_MS * len(rows) * max(len(r.token_ids) for r in rows)


class SimRunner:
    """The step-clock simulator: the same schedulers, no model. Every token is the placeholder id -1 and every
    step lasts what the cost model above says (a split step is two calls, a fused one a single call)."""
    simulated = True

    def __init__(self, slots: int, row_len: int, fused: bool = False):
        self.row_len = row_len
        self.fused = fused

    def run(self, rows: list[Row]) -> ForwardResult:
        assert all(r.start + len(r.token_ids) <= self.row_len for r in rows), "row longer than the KV row"
        prefills = [r for r in rows if r.state is SlotState.PREFILL]
        decodes = [r for r in rows if r.state is not SlotState.PREFILL]
        if self.fused and prefills and decodes:  # one packed call: no padding between rows
            ms, kind = SIM_CALL_MS + SIM_TOKEN_MS * sum(len(r.token_ids) for r in rows), Forward.FUSED
        else:
            calls = [c for c in (prefills, decodes) if c]
            ms = sum(sim_call_ms(c) for c in calls)
            kind = call_kind(len(calls), bool(prefills))
        return ForwardResult({r.slot: SIM_TOKEN for r in rows if r.wants_token}, ms, kind)

    def reference_ms(self) -> float:
        return SIM_CALL_MS + SIM_TOKEN_MS

    def is_special(self, token_id: int) -> bool:
        return False

    def text_delta(self, request: Request, upto: int | None = None) -> str | None:
        return None


def estimate_prompt_tokens(prompt: str) -> int:
    """The simulator's stand-in for a tokenizer: about 4 bytes per token plus a chat template's ~30."""
    return 30 + len(prompt.encode()) // 4


def sim_prompt_ids(prompt: str) -> list[int]:
    """The simulator's placeholder prompt ids, `estimate_prompt_tokens` of them: the template's 30 the same for
    every prompt, then one id per 4 bytes of the prompt, so prompts that share a beginning share a prefix
    (what the prefix cache looks for)."""
    data = prompt.encode()
    return list(range(1, 31)) + [1 + int.from_bytes(data[i:i + 4], "little") % 49151
                                 for i in range(0, len(data) - 3, 4)]
