"""A decode step of our own for Llama-style models: the same arithmetic as transformers' forward, in fewer calls.

A decode call feeds one token per row. transformers runs it through ~15 modules a layer, each with its Python
dispatch, keyword plumbing, cache bookkeeping and mask helpers; `FastDecode` runs the same layer as a handful
of tensor operations on the model's own weights: one fused q|k|v linear, one fused gate|up linear, RoPE from the
model's rotary module, the row's K/V written straight into `SlotKVCache`, and sdpa over the rows' cached K/V
with the query heads grouped by their K/V head, as transformers does for a one-token query.

- On a CPU the linears use oneDNN-packed weights (as `linears.packed_linears` does) and each call reads
  exactly the columns [0, kv_len) of its rows.
- On CUDA each batch size (1, 2, 4, 8, ... up to the slots) is captured once as a CUDA graph that reads whole
  cache rows with a mask built from the positions on the device, so a step replays one graph instead of
  launching some 400 kernels; a call pads its rows to the bucket with throwaway rows that write to the
  scratch column.

What it does not know: prefill (the runner keeps transformers' forward for every call that feeds more than
one token a row), sampling (it returns logits), and any model that is not a plain Llama (`unsupported` says why,
and the runner falls back to the eager path).
"""
import weakref

import torch
import torch.nn.functional as F

from . import cpu_kernels
from .kv_cache import SlotKVCache
from .linears import additive_mask, packed_weight  # the runner's packed copies of o, down and lm_head are reused


def unsupported(model: torch.nn.Module) -> str | None:
    """Why `FastDecode` cannot run `model` (None: it can)."""
    cfg = model.config
    if cfg.model_type != "llama":
        return f"model type {cfg.model_type!r} (only llama)"
    if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
        return "biased linears"
    if cfg.hidden_act != "silu":
        return f"activation {cfg.hidden_act!r}"
    if cfg._attn_implementation != "sdpa":
        return f"attention {cfg._attn_implementation!r} (only sdpa)"
    return None


class FusedWeights:
    """The decoder's weights as the fast step reads them: q|k|v and gate|up concatenated (one linear each). On a
    float32 CPU each linear keeps two forms: oneDNN-packed, and plain row-major for `cpu_kernels.few_row_linear`
    (1-4 rows; at 1 row it streams the weights about 1.7x faster than oneDNN). Made once per model and shared by
    every runner of it."""

    def __init__(self, model: torch.nn.Module, packed: bool):
        self.packed = packed
        self.kernel = cpu_kernels.kernel() if packed else None

        def pair(*weights):  # (packed or None, plain)
            plain = (torch.cat(weights) if len(weights) > 1 else weights[0]).detach()
            if not packed:
                return None, plain
            return (packed_weight(weights[0]) if len(weights) == 1
                    else torch.ops.mkldnn._reorder_linear_weight(plain)), plain.contiguous()

        self.layers = []
        for layer in model.model.layers:
            a, m = layer.self_attn, layer.mlp
            self.layers.append((layer.input_layernorm, pair(a.q_proj.weight, a.k_proj.weight, a.v_proj.weight),
                                pair(a.o_proj.weight), layer.post_attention_layernorm,
                                pair(m.gate_proj.weight, m.up_proj.weight), pair(m.down_proj.weight)))
        self.lm_head = pair(model.lm_head.weight)

    def linear(self, x: torch.Tensor, w: tuple[torch.Tensor | None, torch.Tensor]) -> torch.Tensor:
        packed, plain = w
        if self.kernel is not None and cpu_kernels.usable(x, plain):
            return self.kernel.few_row_linear(x, plain)
        if packed is not None:
            return torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
        return F.linear(x, plain)


_WEIGHTS: "weakref.WeakKeyDictionary[torch.nn.Module, FusedWeights]" = weakref.WeakKeyDictionary()


def rms_norm(norm: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """LlamaRMSNorm's arithmetic (variance in float32, weight applied in the model's dtype); in float32 torch's
    fused rms_norm computes the same values (bit for bit, checked in tests/test_fast_decode.py) in one call."""
    if x.dtype == torch.float32:
        return F.rms_norm(x, norm.weight.shape, norm.weight, norm.variance_epsilon)
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    return norm.weight * h.to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


def graph_bucket(n: int, slots: int) -> int:
    """The captured batch size a call of `n` rows replays: the next power of two, at most the slots."""
    return min(1 << (n - 1).bit_length(), slots)


class FastDecode:
    def __init__(self, model: torch.nn.Module, cache: SlotKVCache, packed: bool):
        assert unsupported(model) is None, unsupported(model)
        cfg = model.config
        if model not in _WEIGHTS or _WEIGHTS[model].packed != packed:
            _WEIGHTS[model] = FusedWeights(model, packed)
        self.w = _WEIGHTS[model]
        self.model = model
        self.cache = cache
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = cache.layers[0].keys.shape[3]
        self.inter = cfg.intermediate_size
        self.graphed = torch.device(cache.device).type == "cuda"
        self.graphs: dict[int, tuple] = {}  # bucket -> (graph, static ids, pos, write, slots, logits)
        self.pool = None

    # -- the step -------------------------------------------------------------------------------------------
    def hidden(self, ids: torch.Tensor, pos: torch.Tensor, write: torch.Tensor, slots: torch.Tensor,
               kv_len: int, mask: torch.Tensor | None, rows: slice | None) -> torch.Tensor:
        """The final-normed hidden state (B, E) of one token per row: ids, pos, write, slots are (B,); row b is
        cache slot slots[b] (or the slice `rows`), feeds ids[b] at position pos[b], writes its K/V to column
        write[b] and reads columns [0, kv_len) under `mask` (B, 1, 1, kv_len) additive, or None (all visible)."""
        B, H, KV, D = ids.shape[0], self.heads, self.kv_heads, self.head_dim
        w, cache = self.w, self.cache
        x = self.model.model.embed_tokens(ids)                                   # (B, E)
        cos, sin = self.model.model.rotary_emb(x, pos[:, None])                 # (B, 1, D)
        read = rows if rows is not None else slots
        for (norm1, qkv_w, o_w, norm2, gu_w, down_w), layer in zip(w.layers, cache.layers):
            qkv = w.linear(rms_norm(norm1, x), qkv_w)                           # (B, (H + 2 KV) D)
            qk = rotate(qkv[:, :(H + KV) * D].view(B, H + KV, D), cos, sin)    # RoPE on q and k at once
            q, k = qk[:, :H], qk[:, H:]
            layer.keys[slots, :, write] = k                                     # (B, KV, D) into (S, KV, L + 1, D)
            layer.values[slots, :, write] = qkv[:, (H + KV) * D:].view(B, KV, D)
            keys, values = layer.keys[read, :, :kv_len], layer.values[read, :, :kv_len]  # (B, KV, kv_len, D)
            # the H query heads grouped by the K/V head they share: (B, KV, H / KV, D), as transformers' pack_gqa
            o = F.scaled_dot_product_attention(q.reshape(B, KV, H // KV, D), keys, values, attn_mask=mask)
            x = x + w.linear(o.reshape(B, H * D), o_w)
            gu = w.linear(rms_norm(norm2, x), gu_w)                              # (B, 2 I)
            x = x + w.linear(F.silu(gu[:, :self.inter]) * gu[:, self.inter:], down_w)
        return rms_norm(self.model.model.norm, x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.w.linear(hidden, self.w.lm_head)                            # (B, V)

    @torch.inference_mode()
    def decode(self, ids: list[int], pos: list[int], write: list[int], slots: list[int], kv_len: int,
               masked: bool, wanted: list[int]) -> torch.Tensor:
        """Logits (W, V) of the batch rows `wanted` after one decode call (rows as in `hidden`, in lists)."""
        if self.graphed:
            return self.replay(ids, pos, write, slots)[wanted]
        device = self.cache.device
        pos_t = torch.tensor(pos, device=device)
        contiguous = slots == list(range(slots[0], slots[0] + len(slots)))
        mask = None
        if masked:
            visible = torch.arange(kv_len, device=device) <= pos_t[:, None]      # (B, kv_len)
            mask = additive_mask(visible, self.model.dtype)[:, None, None]       # (B, 1, 1, kv_len)
        hidden = self.hidden(torch.tensor(ids, device=device), pos_t, torch.tensor(write, device=device),
                             torch.tensor(slots, device=device), kv_len, mask,
                             slice(slots[0], slots[0] + len(slots)) if contiguous else None)
        return self.logits(hidden[wanted])

    # -- CUDA graphs ----------------------------------------------------------------------------------------
    def replay(self, ids: list[int], pos: list[int], write: list[int], slots: list[int]) -> torch.Tensor:
        """Run the captured graph of the call's bucket; the logits of every bucket row (bucket, V)."""
        n = len(ids)
        bucket = graph_bucket(n, self.cache.slots)
        if bucket not in self.graphs:
            self.capture(bucket)
        _, s_ids, s_pos, s_write, s_slots, s_logits = self.graphs[bucket]
        pad = bucket - n  # throwaway rows: a pad token at position 0 of slot 0, written to the scratch column
        s_ids.copy_(torch.tensor(ids + [0] * pad), non_blocking=True)
        s_pos.copy_(torch.tensor(pos + [0] * pad), non_blocking=True)
        s_write.copy_(torch.tensor(write + [self.cache.scratch] * pad), non_blocking=True)
        s_slots.copy_(torch.tensor(slots + [0] * pad), non_blocking=True)
        self.graphs[bucket][0].replay()
        return s_logits[:n]

    def graph_step(self, ids, pos, write, slots) -> torch.Tensor:
        """What a graph captures: whole cache rows read under a mask built on the device from the positions."""
        width = self.cache.layers[0].keys.shape[2]
        visible = torch.arange(width, device=pos.device) <= pos[:, None]           # (B, L + 1); scratch never
        mask = additive_mask(visible, self.model.dtype)[:, None, None]
        return self.logits(self.hidden(ids, pos, write, slots, width, mask, None))

    def capture(self, bucket: int) -> None:
        device = self.cache.device
        s_ids = torch.zeros(bucket, dtype=torch.long, device=device)
        s_pos = torch.zeros(bucket, dtype=torch.long, device=device)
        s_write = torch.full((bucket,), self.cache.scratch, dtype=torch.long, device=device)
        s_slots = torch.zeros(bucket, dtype=torch.long, device=device)
        with torch.inference_mode():
            stream = torch.cuda.Stream(device)
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):  # warm the kernels up outside the capture, as CUDA graphs ask
                self.graph_step(s_ids, s_pos, s_write, s_slots)
            torch.cuda.current_stream(device).wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            if self.pool is None:
                self.pool = torch.cuda.graph_pool_handle()
            with torch.cuda.graph(graph, pool=self.pool):
                s_logits = self.graph_step(s_ids, s_pos, s_write, s_slots)
        self.graphs[bucket] = (graph, s_ids, s_pos, s_write, s_slots, s_logits)

    def capture_all(self) -> list[int]:
        """Capture every bucket up to the slots now (the runner does when it is made, so no step pays for it)."""
        buckets = sorted({graph_bucket(n, self.cache.slots) for n in range(1, self.cache.slots + 1)})
        for b in buckets:
            if b not in self.graphs:
                self.capture(b)
        return buckets
