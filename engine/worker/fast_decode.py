"""A decode step of our own for Llama-style models: the same arithmetic as transformers' forward, in fewer calls.

A decode call feeds one token per row. transformers runs it through ~15 modules a layer, each with its Python
dispatch, keyword plumbing, cache bookkeeping and mask helpers; `FastDecode` runs the same layer as a handful
of tensor operations on the model's own weights: one fused q|k|v linear, one fused gate|up linear, RoPE from the
model's rotary module, the row's K/V written straight into the blocks of `kv_cache.PagedKVCache` through its block
table, and sdpa over the rows' K/V read through their tables, with the query heads grouped by their K/V head, as
transformers does for a one-token query.

- On a float32 CPU where the compiled extension built (`cpu_kernels`), the linears of a call of 1-16 rows are its
  few_row_linear (oneDNN-packed weights for more rows, or where it did not build, as `linears.packed_linears`
  does); attention is its paged_decode_attention, reading each row's K/V blocks where they lie through its table
  (no gather), and the operations between the linears are its layer_ops (`hidden_cpu`). Otherwise each call reads
  exactly the positions [0, kv_len) of its rows (a view of the pool where the tables allow, as the cache's plan
  says) into sdpa.
- On CUDA each batch size (1, 2, 4, 8, ... up to the slots) and table width (1, 2, 4, ... blocks) is captured once
  as a CUDA graph that reads block tables and positions from static device tensors, gathers each row's whole
  table and masks it by the positions on the device, so a step replays one graph instead of launching some 400
  kernels; a call pads its rows to the bucket with copies of its first row that write back exactly what that row
  writes (a write marked invalid writes back what the block held).

A fused runner's packed calls (prompt tokens beside decode tokens, `ModelRunner.forward_packed`) come here too on
the compiled path: each token is a row of its own, with its request's table and a length of its position + 1, so
rope_write stores every token's K/V before attention and each prompt token sees exactly its causal prefix (a call
with a prompt-logprobs row stays on transformers' forward, which keeps every prompt position's hidden state).

What it does not know: padded prefill (the runner keeps transformers' forward for every padded call that feeds
more than one token a row), sampling (it returns logits), and any model that is not a plain Llama (`unsupported`
says why, and the runner falls back to the eager path).
"""
import contextlib
import weakref

import torch
import torch.nn.functional as F

from engine.worker.cpu import kernels as cpu_kernels
from engine.worker.kv_cache import PagedKVCache, Plan
from engine.worker.linears import additive_mask, packed_weight  # the runner's packed copies of o, down and lm_head are reused


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
    """The decoder's weights as the fast step reads them: q|k|v and gate|up concatenated (one linear each). Each
    linear is a triple (packed, panels, plain): on a float32 CPU, oneDNN-packed (for calls of more than 16 rows)
    and repacked into `cpu_kernels.few_row_linear`'s panels (1-16 rows: at 1 row it streams the weights about 1.7x
    faster than oneDNN, at 8-16 it multiply-adds about twice as fast), plain None; elsewhere plain alone. Made once
    per model and shared by every runner of it."""

    def __init__(self, model: torch.nn.Module, packed: bool):
        self.packed = packed
        self.kernel = cpu_kernels.load() if packed else None

        def forms(*weights):
            plain = (torch.cat(weights) if len(weights) > 1 else weights[0]).detach()
            if not packed:
                return None, None, plain
            onednn = packed_weight(weights[0]) if len(weights) == 1 else torch.ops.mkldnn._reorder_linear_weight(plain)
            return onednn, cpu_kernels.panels(plain), None  # panels None where the extension is not loaded

        self.layers = []
        for layer in model.model.layers:
            a, m = layer.self_attn, layer.mlp
            self.layers.append((layer.input_layernorm, forms(a.q_proj.weight, a.k_proj.weight, a.v_proj.weight),
                                forms(a.o_proj.weight), layer.post_attention_layernorm,
                                forms(m.gate_proj.weight, m.up_proj.weight), forms(m.down_proj.weight)))
        self.lm_head = forms(model.lm_head.weight)
        linears = [self.lm_head] + [f for layer in self.layers for f in (layer[1], layer[2], layer[4], layer[5])]
        self.all_panels = all(f[1] is not None for f in linears)  # every linear ours up to MAX_ROWS rows

    def linear(self, x: torch.Tensor, w: tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]):
        packed, panels, plain = w
        if cpu_kernels.usable(x, panels):
            return self.kernel.few_row_linear(x, panels)
        if packed is not None:
            return torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
        return F.linear(x, plain)


_WEIGHTS: "weakref.WeakKeyDictionary[torch.nn.Module, FusedWeights]" = weakref.WeakKeyDictionary()


def rms_norm(norm: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """LlamaRMSNorm's arithmetic (variance in float32, weight applied in the model's dtype); in float32 torch's
    fused rms_norm computes the same values (bit for bit, checked in tests/engine/worker/test_fast_decode.py) in one call."""
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
    def __init__(self, model: torch.nn.Module, cache: PagedKVCache, packed: bool, slots: int):
        assert unsupported(model) is None, unsupported(model)
        cfg = model.config
        if model not in _WEIGHTS or _WEIGHTS[model].packed != packed:
            _WEIGHTS[model] = FusedWeights(model, packed)
        self.w = _WEIGHTS[model]
        self.model = model
        self.cache = cache
        self.slots, self.max_blocks = slots, cache.num_blocks  # graph buckets: rows up to the slots, tables up to the pool
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = cache.layers[0].keys.shape[3]
        self.inter = cfg.intermediate_size
        self.graphed = cache.device.type == "cuda"
        # on a float32 CPU where the extension built: attention reading the blocks in place, layer_ops between linears
        self.ops = cpu_kernels.load() if not self.graphed and cache.pool.dtype == torch.float32 else None
        self.graphs: dict[tuple[int, int], tuple] = {}  # (rows, blocks) -> (graph, static inputs, logits)
        self.pool = None

    # -- the step -------------------------------------------------------------------------------------------
    def hidden(self, ids: torch.Tensor, pos: torch.Tensor, plan: Plan, mask: torch.Tensor | None,
               keep: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """The final-normed hidden state (B, E) of one token per row: ids, pos are (B,); row b feeds ids[b] at
        position pos[b], writes its K/V and reads its rows' K/V as `plan` says, under `mask` (B, 1, 1, kv_len)
        additive, or None (all visible). `keep` (graphs): (src (B,), valid (B,)): row b writes row src[b]'s K/V,
        or, where not valid, what its destination held."""
        B, H, KV, D = ids.shape[0], self.heads, self.kv_heads, self.head_dim
        w, cache = self.w, self.cache
        x = self.model.model.embed_tokens(ids)                                   # (B, E)
        cos, sin = self.model.model.rotary_emb(x, pos[:, None])                 # (B, 1, D)
        for (norm1, qkv_w, o_w, norm2, gu_w, down_w), layer in zip(w.layers, cache.layers):
            qkv = w.linear(rms_norm(norm1, x), qkv_w)                           # (B, (H + 2 KV) D)
            qk = rotate(qkv[:, :(H + KV) * D].view(B, H + KV, D), cos, sin)    # RoPE on q and k at once
            q, k, v = qk[:, :H], qk[:, H:], qkv[:, (H + KV) * D:].view(B, KV, D)
            if keep is not None:
                k, v = (kept(t, blocks, plan.dst, *keep) for t, blocks in ((k, layer.keys), (v, layer.values)))
            cache.write(layer, k, v, plan)                                      # (B, KV, D) into their blocks
            keys, values = cache.read(layer.keys, plan, 0), cache.read(layer.values, plan, 1)  # (B, KV, kv_len, D)
            # the H query heads grouped by the K/V head they share: (B, KV, H / KV, D), as transformers' pack_gqa
            o = F.scaled_dot_product_attention(q.reshape(B, KV, H // KV, D), keys, values, attn_mask=mask)
            x = x + w.linear(o.reshape(B, H * D), o_w)
            gu = w.linear(rms_norm(norm2, x), gu_w)                              # (B, 2 I)
            x = x + w.linear(F.silu(gu[:, :self.inter]) * gu[:, self.inter:], down_w)
        return rms_norm(self.model.model.norm, x)

    def hidden_cpu(self, ids: torch.Tensor, pos: torch.Tensor, slots: torch.Tensor, tables: torch.Tensor,
                   lens: torch.Tensor) -> torch.Tensor:
        """`hidden` on a float32 CPU with the compiled kernels: row b writes its K/V into pool slot slots[b] (none
        where < 0) and attends to its first lens[b] positions through tables[b] (B, nb), read in place. Between the
        linears each layer makes three calls of layer_ops.cpp: RoPE with the K/V write, SiLU * up, and the residual
        add fused with the next RMS norm (the residual stream x is added to in place)."""
        ops, w, H, D = self.ops, self.w, self.heads, self.head_dim
        B = ids.shape[0]
        x = self.model.model.embed_tokens(ids)                                   # (B, E), a new tensor
        cos, sin = (t.reshape(B, D).contiguous() for t in self.model.model.rotary_emb(x, pos[:, None]))
        norms = [layer[0] for layer in w.layers] + [self.model.model.norm]      # each layer's first, then the last
        h = ops.add_rms_norm(x, None, norms[0].weight, norms[0].variance_epsilon)
        for (_, qkv_w, o_w, norm2, gu_w, down_w), layer, after in zip(w.layers, self.cache.layers, norms[1:]):
            q = ops.rope_write(w.linear(h, qkv_w), cos, sin, layer.keys, layer.values, slots, H)  # (B, H, D)
            o = ops.paged_decode_attention(q, layer.keys, layer.values, tables, lens, D ** -0.5)
            h = ops.add_rms_norm(x, w.linear(o.reshape(B, H * D), o_w), norm2.weight, norm2.variance_epsilon)
            down = w.linear(ops.silu_mul(w.linear(h, gu_w)), down_w)
            h = ops.add_rms_norm(x, down, after.weight, after.variance_epsilon)
        return h

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.w.linear(hidden, self.w.lm_head)                            # (B, V)

    @torch.inference_mode()
    def decode(self, ids: list[int], pos: list[int], writes: list[bool], tables: list[tuple[int, ...]], kv_len: int,
               masked: bool, wanted: list[int]) -> torch.Tensor:
        """Logits (W, V) of the batch rows `wanted` after one decode call: row b feeds ids[b] at position pos[b]
        through tables[b], writing its K/V where writes[b] (a filler writes nothing), reading [0, kv_len)."""
        if self.graphed:
            return self.replay(ids, pos, writes, tables, kv_len)[wanted]
        device = self.cache.device
        pos_t = torch.tensor(pos, device=device)
        if self.ops is not None:  # row b reads positions [0, pos[b]] (masked) or [0, kv_len), in place
            bs, nb = self.cache.block_size, -(-kv_len // self.cache.block_size)
            table = torch.tensor([list(t[:nb]) + [t[0]] * (nb - len(t[:nb])) for t in tables])
            lens = (pos_t + 1).clamp(max=kv_len) if masked else torch.full((len(ids),), kv_len)
            slots = torch.tensor([t[p // bs] * bs + p % bs if w else -1 for t, p, w in zip(tables, pos, writes)])
            # every linear ours at up to MAX_ROWS rows: torch's own small operations then run on this thread alone
            ours = self.w.all_panels and len(ids) <= cpu_kernels.MAX_ROWS
            alone = cpu_kernels.kernels_alone() if ours else contextlib.nullcontext()
            with alone:
                hidden = self.hidden_cpu(torch.tensor(ids, device=device), pos_t, slots, table, lens)
                return self.logits(hidden[wanted])
        plan = self.cache.plan([list(t) for t in tables], [[p if w else -1] for p, w in zip(pos, writes)], kv_len)
        mask = None
        if masked:
            visible = torch.arange(kv_len, device=device) <= pos_t[:, None]      # (B, kv_len)
            mask = additive_mask(visible, self.model.dtype)[:, None, None]       # (B, 1, 1, kv_len)
        hidden = self.hidden(torch.tensor(ids, device=device), pos_t, plan, mask)
        return self.logits(hidden[wanted])

    # -- CUDA graphs ----------------------------------------------------------------------------------------
    def bucket(self, n: int, kv_len: int) -> tuple[int, int]:
        return graph_bucket(n, self.slots), graph_bucket(-(-kv_len // self.cache.block_size), self.max_blocks)

    def replay(self, ids: list[int], pos: list[int], writes: list[bool], tables: list[tuple[int, ...]],
               kv_len: int) -> torch.Tensor:
        """Run the captured graph of the call's bucket; the logits of every bucket row (bucket, V)."""
        n = len(ids)
        rows, width = key = self.bucket(n, kv_len)
        if key not in self.graphs:
            self.capture(rows, width)
        graph, s_ids, s_pos, s_tables, s_src, s_valid, s_logits = self.graphs[key]
        pad = rows - n  # throwaway rows: copies of row 0 that write back what row 0 writes
        table = [list(t[:width]) + [t[0]] * (width - len(t[:width])) for t in tables]
        s_ids.copy_(torch.tensor(ids + ids[:1] * pad), non_blocking=True)
        s_pos.copy_(torch.tensor(pos + pos[:1] * pad), non_blocking=True)
        s_tables.copy_(torch.tensor(table + table[:1] * pad), non_blocking=True)
        s_src.copy_(torch.tensor(list(range(n)) + [0] * pad), non_blocking=True)
        s_valid.copy_(torch.tensor(writes + writes[:1] * pad), non_blocking=True)
        graph.replay()
        return s_logits[:n]

    def graph_step(self, ids, pos, tables, src, valid) -> torch.Tensor:
        """What a graph captures: each row's whole table (B, width) gathered, under a mask built on the device from
        the positions; the write slots computed on the device from the tables."""
        bs = self.cache.block_size
        width = tables.shape[1] * bs
        dst = tables.gather(1, (pos // bs)[:, None])[:, 0] * bs + pos % bs      # (B,)
        plan = Plan(dst, None, tables, None, None, ids.shape[0], width)
        visible = torch.arange(width, device=pos.device) <= pos[:, None]         # (B, width)
        mask = additive_mask(visible, self.model.dtype)[:, None, None]
        return self.logits(self.hidden(ids, pos, plan, mask, (src, valid)))

    def capture(self, rows: int, width: int) -> None:
        device = self.cache.device
        z = lambda *shape, dtype=torch.long: torch.zeros(shape, dtype=dtype, device=device)  # noqa: E731
        static = (z(rows), z(rows), z(rows, width), z(rows), z(rows, dtype=torch.bool))  # ids, pos, tables, src, valid
        with torch.inference_mode():
            stream = torch.cuda.Stream(device)
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):  # warm the kernels up outside the capture, as CUDA graphs ask
                self.graph_step(*static)
            torch.cuda.current_stream(device).wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            if self.pool is None:
                self.pool = torch.cuda.graph_pool_handle()
            with torch.cuda.graph(graph, pool=self.pool):
                s_logits = self.graph_step(*static)
        self.graphs[(rows, width)] = (graph, *static, s_logits)

    def capture_all(self, blocks: int) -> list[tuple[int, int]]:
        """Capture every bucket up to the slots and tables of `blocks` blocks now (the runner does when it is made,
        so no step pays for it; a longer table is captured when a call first needs it)."""
        keys = sorted({(graph_bucket(n, self.slots), graph_bucket(b, self.max_blocks))
                       for n in range(1, self.slots + 1) for b in range(1, blocks + 1)})
        for key in keys:
            if key not in self.graphs:
                self.capture(*key)
        return keys


def kept(t: torch.Tensor, blocks: torch.Tensor, dst: torch.Tensor, src: torch.Tensor, valid: torch.Tensor):
    """What each graph row writes (B, KV, D): row src[b]'s K or V, or where not valid[b] what its slot holds."""
    held = blocks.view(-1, *t.shape[1:])[dst]
    return torch.where(valid[:, None, None], t[src], held)
