"""Runners compute the rows a scheduler decided on and return one greedy token per row that wants one.

`ModelRunner` runs a real model over a per-slot KV cache: each row feeds its tokens at its own cache
positions, left-padded to the longest row of the call with explicit `position_ids`, and the logit
is read at the last column, where every row's last real token sits. Padded query positions attend to
column 0 and write to the scratch column, so they can neither produce NaN nor touch real K/V.
`SimRunner` needs no model: every step is one tick and every token is a placeholder.
Runners know rows and slots, never policies.
"""
import time
from dataclasses import dataclass

import torch

from .kv_cache import SlotKVCache
from .model import LoadedModel
from .request import Request
from .scheduler import Row
from .step import SlotState


@dataclass
class ForwardResult:
    tokens: dict[int, int | None]  # slot -> sampled token id
    forward_ms: float              # time inside forward calls (synchronized on CUDA)
    forward: str                   # "none", "prefill", "decode", "split" (two calls) or "fused" (one call, both kinds)


class ModelRunner:
    simulated = False

    def __init__(self, lm: LoadedModel, slots: int, row_len: int, fused: bool = False):
        cfg = lm.model.config
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.lm = lm
        self.fused = fused
        self.cache = SlotKVCache(cfg.num_hidden_layers, slots, cfg.num_key_value_heads, row_len, head_dim,
                                 lm.dtype, lm.device)

    def run(self, rows: list[Row]) -> ForwardResult:
        prefills = [r for r in rows if r.state is SlotState.PREFILL]
        decodes = [r for r in rows if r.state is not SlotState.PREFILL]
        calls = [rows] if self.fused or not prefills or not decodes else [prefills, decodes]
        kind = "fused" if len(calls) == 1 and prefills and decodes else "split" if len(calls) == 2 else \
            "prefill" if prefills else "decode"
        tokens = {}
        t0 = time.perf_counter()
        for call in calls:
            tokens.update(self.forward(call))
        if self.lm.device.type == "cuda":
            torch.cuda.synchronize()
        return ForwardResult(tokens, (time.perf_counter() - t0) * 1000, kind)

    @torch.inference_mode()
    def forward(self, rows: list[Row]) -> dict[int, int]:
        Q = max(len(r.token_ids) for r in rows)
        scratch = self.cache.scratch
        ids, pos, write = [], [], []
        for r in rows:
            pad = Q - len(r.token_ids)
            real = list(range(r.start, r.start + len(r.token_ids)))
            assert real[-1] < scratch, "row longer than the KV cache row"
            ids.append([self.lm.pad_id] * pad + r.token_ids)
            pos.append([0] * pad + real)          # pad queries sit at position 0 and attend to column 0
            write.append([scratch] * pad + real)  # ...and write their K/V to the scratch column
        kv_len = max(r.start + len(r.token_ids) for r in rows)
        device = self.lm.device
        ids = torch.tensor(ids, device=device)                        # (B, Q)
        pos = torch.tensor(pos, device=device)                        # (B, Q)
        mask = torch.arange(kv_len, device=device) <= pos[:, :, None]  # (B, Q, kv_len): key k visible to query q
        self.cache.plan([r.slot for r in rows], torch.tensor(write), kv_len)
        hidden = self.lm.model.model(input_ids=ids, position_ids=pos, attention_mask=mask[:, None],
                                     cache=self.cache, use_cache=True).last_hidden_state  # (B, Q, E)
        want = [b for b, r in enumerate(rows) if r.wants_token]
        if not want:
            return {}
        logits = self.lm.model.lm_head(hidden[want, -1])  # (W, V): left padding puts every last token at -1
        return dict(zip((rows[b].slot for b in want), logits.argmax(-1).tolist()))

    def text_delta(self, request: Request) -> str:
        """The text `request`'s newest token adds to its response (empty while a UTF-8 character is incomplete)."""
        full = self.lm.tokenizer.decode(request.output_ids, clean_up_tokenization_spaces=False)
        if full.endswith("\ufffd"):
            return ""
        delta, request.text = full[len(request.text):], full
        return delta


SIM_TOKEN = -1  # the simulator's placeholder token id


class SimRunner:
    """The step-clock simulator: the same schedulers, no model. Every token is the placeholder id -1 and
    every step costs 0 ms: only the step clock means anything."""
    simulated = True

    def __init__(self, slots: int, row_len: int, fused: bool = False):
        self.row_len = row_len

    def run(self, rows: list[Row]) -> ForwardResult:
        assert all(r.start + len(r.token_ids) <= self.row_len for r in rows), "row longer than the KV row"
        return ForwardResult({r.slot: SIM_TOKEN for r in rows if r.wants_token}, 0.0, "none")

    def text_delta(self, request: Request) -> str | None:
        return None


def estimate_prompt_tokens(prompt: str) -> int:
    """The simulator's stand-in for a tokenizer: about 4 bytes per token plus a chat template's ~30."""
    return 30 + len(prompt.encode()) // 4
