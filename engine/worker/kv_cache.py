"""A real paged KV cache that transformers' Llama-style models write into: one pool of blocks, read through tables.

All K/V lives in one tensor `pool` of shape `(layers, 2, num_blocks, block_size, kv_heads, head_dim)` (2: keys,
values); a layer's `keys` and `values` are views of it, `(num_blocks, block_size, kv_heads, head_dim)`. Nothing else
is allocated: no per-slot row and no scratch block, so `kv_bytes` is exactly the blocks' bytes. Position p of a
row lives in block `table[p // block_size]` at offset `p % block_size`. Block-major, then token, then head (vLLM's
flash layout): a run of consecutive blocks is one stretch of memory, so rows whose tables are runs equally spaced
in the pool read their K/V as a view (no copy); any other tables are gathered block by block.

Before each forward the runner calls `plan()` (padded batches) or `plan_packed()` (one packed sequence) with each
row's table and where its real tokens sit; the model's attention layers then call `update()`, which writes the real
tokens' K/V (padded query positions write nothing) and returns each row's K/V up to the call's
longest row. `copy`, `swap_out` and `swap_in` move whole blocks (all layers at once) within the pool and between it
and a host pool of the same layout (pinned on CUDA; on a CPU an ordinary separate tensor, the same DRAM).

This module knows nothing about requests, slots or scheduling: rows are block tables.
"""
import time
from dataclasses import dataclass

import torch
from transformers.cache_utils import Cache, CacheLayerMixin


@dataclass
class Plan:
    """Where one forward's K/V goes and what its attention reads (made by `PagedKVCache.plan*`)."""
    dst: torch.Tensor                   # (M,) flat pool slots (block * block_size + offset) of the M real tokens
    src: torch.Tensor | None            # (M,) which of the call's B*Q query tokens those are (None: all of them)
    tables: torch.Tensor | None         # (B, nb) block tables to gather (None: `view` or `tokens` reads)
    view: tuple[int, int] | None        # (first block, blocks between rows): tables that are equally spaced runs
    tokens: torch.Tensor | None         # (T,) flat slots a packed call reads, every row's K/V one after another
    rows: int                           # B
    kv_len: int                         # K/V positions each row reads


class PagedLayer(CacheLayerMixin):
    """The K/V of one decoder layer: views of the cache's pool."""

    def __init__(self, cache: "PagedKVCache", index: int):
        super().__init__()
        self.cache = cache
        self.keys = cache.pool[index, 0]    # (N, bs, H, D)
        self.values = cache.pool[index, 1]  # (N, bs, H, D)
        self.is_initialized = True
        self.device = cache.device

    def lazy_initialization(self, key_states, value_states) -> None:  # preallocated in the pool
        pass

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        # key_states: (B, H, Q, D) -> (B * Q, H, D), the flat order Plan.src counts in
        c = self.cache
        H, D = key_states.shape[1], key_states.shape[3]
        c.write(self, key_states.transpose(1, 2).reshape(-1, H, D), value_states.transpose(1, 2).reshape(-1, H, D))
        return c.read(self.keys, which=0), c.read(self.values, which=1)

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.cache.plan_now.kv_len, 0

    def get_seq_length(self) -> int:
        return self.cache.plan_now.kv_len

    def get_max_length(self) -> int:
        return self.keys.shape[0] * self.keys.shape[1]


class PagedKVCache(Cache):
    def __init__(self, num_layers: int, num_blocks: int, block_size: int, kv_heads: int, head_dim: int,
                 dtype: torch.dtype, device, host_blocks: int = 0):
        self.device = torch.device(device)
        self.num_blocks, self.block_size = num_blocks, block_size
        shape = (num_layers, 2, num_blocks, block_size, kv_heads, head_dim)
        self.pool = torch.zeros(shape, dtype=dtype, device=device)                    # (L, 2, N, bs, H, D)
        self.host = None                                                              # (L, 2, host_blocks, bs, H, D)
        if host_blocks:
            self.host = torch.zeros((*shape[:2], host_blocks, *shape[3:]), dtype=dtype,
                                    pin_memory=self.device.type == "cuda")
        self.workspace = [torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype)]  # CPU gathers of K, V (reused)
        super().__init__(layers=[PagedLayer(self, i) for i in range(num_layers)])
        self.plan([[0]], [[-1]], 1)

    @property
    def kv_bytes(self) -> int:
        return self.pool.numel() * self.pool.element_size()

    # -- planning a forward ---------------------------------------------------------------------------------
    def plan(self, tables: list[list[int]], positions: list[list[int]], kv_len: int) -> Plan:
        """A padded batch: row b reads positions [0, kv_len) through tables[b]; its query token q sits at position
        positions[b][q] and writes its K/V there (-1: a padded query, which writes nothing)."""
        bs, B = self.block_size, len(tables)
        nb = -(-kv_len // bs)
        flat = [(b * len(p) + q, t[x // bs] * bs + x % bs) for b, (t, p) in enumerate(zip(tables, positions))
                for q, x in enumerate(p) if x >= 0]
        src, dst = zip(*flat) if flat else ((), ())
        every = len(src) == sum(len(p) for p in positions)
        view = self.run_of(tables, nb)
        padded = None if view is not None else [list(t[:nb]) + [t[0]] * (nb - len(t[:nb])) for t in tables]
        self.plan_now = Plan(torch.tensor(dst, dtype=torch.long, device=self.device),
                             None if every else torch.tensor(src, dtype=torch.long, device=self.device),
                             None if padded is None else torch.tensor(padded, device=self.device),
                             view, None, B, kv_len)
        return self.plan_now

    def plan_packed(self, tables: list[list[int]], starts: list[int], lengths: list[int]) -> Plan:
        """A packed forward, a batch of one sequence holding every row's tokens without padding: row i's
        lengths[i] tokens sit at positions starts[i] onwards; attention reads every row's positions
        [0, starts[i] + lengths[i]), one row after another."""
        bs = self.block_size
        slot = lambda t, x: t[x // bs] * bs + x % bs  # noqa: E731
        dst = [slot(t, x) for t, s, n in zip(tables, starts, lengths) for x in range(s, s + n)]
        read = [slot(t, x) for t, s, n in zip(tables, starts, lengths) for x in range(s + n)]
        self.plan_now = Plan(torch.tensor(dst, device=self.device), None, None, None,
                             torch.tensor(read, device=self.device), 1, len(read))
        return self.plan_now

    def run_of(self, tables: list[list[int]], nb: int) -> tuple[int, int] | None:
        """(first block, stride) when each table starts with a run of nb consecutive blocks and the runs are equally
        spaced by a positive stride in the pool (then the rows' K/V is one strided view); else None."""
        if any(len(t) < nb or list(t[:nb]) != list(range(t[0], t[0] + nb)) for t in tables):
            return None
        stride = tables[1][0] - tables[0][0] if len(tables) > 1 else nb
        if stride <= 0 or any(t[0] != tables[0][0] + b * stride for b, t in enumerate(tables)):
            return None
        return tables[0][0], stride

    # -- what a layer does with the plan --------------------------------------------------------------------
    def write(self, layer: PagedLayer, k: torch.Tensor, v: torch.Tensor, plan: Plan | None = None) -> None:
        """Write the real tokens of k, v (B * Q, H, D) into the layer's blocks."""
        p = plan or self.plan_now
        if p.src is not None:
            k, v = k[p.src], v[p.src]
        layer.keys.view(-1, *k.shape[1:]).index_copy_(0, p.dst, k)    # (N * bs, H, D)
        layer.values.view(-1, *v.shape[1:]).index_copy_(0, p.dst, v)

    def read(self, blocks: torch.Tensor, plan: Plan | None = None, which: int = 0) -> torch.Tensor:
        """Each row's K or V (B, H, kv_len, D) from one layer's blocks (N, bs, H, D): a view where the plan allows.
        A gather on a CPU goes into a reused workspace (`which`: 0 keys, 1 values), valid until the next layer's
        read: index_select into memory already paged in ran ~3x faster here than `blocks[tables]`."""
        p = plan or self.plan_now
        N, bs, H, D = blocks.shape
        if p.tokens is not None:  # packed: (T, H, D) -> (1, H, T, D)
            return blocks.view(N * bs, H, D)[p.tokens].transpose(0, 1)[None]
        if p.view is not None:
            first, stride = p.view
            return blocks.as_strided((p.rows, p.kv_len, H, D), (stride * bs * H * D, H * D, D, 1),
                                     blocks.storage_offset() + first * bs * H * D).transpose(1, 2)
        index, out = p.tables.flatten(), None
        if self.device.type == "cpu":
            space = self.workspace[which]
            if space.numel() < index.numel() * bs * H * D:
                space = self.workspace[which] = torch.empty(index.numel() * bs * H * D, dtype=blocks.dtype)
            out = space[:index.numel() * bs * H * D].view(index.numel(), bs * H * D)
        gathered = torch.index_select(blocks.view(N, bs * H * D), 0, index, out=out)  # (B * nb, bs * H * D)
        return gathered.view(p.rows, -1, H, D)[:, :p.kv_len].transpose(1, 2)

    # -- whole blocks, all layers at once -------------------------------------------------------------------
    def apply(self, swap_out=(), swap_in=(), copies=()) -> float:
        """Apply a step's block copies in this order: device -> host, host -> device, device -> device (copy on
        write); how long they took in ms (synchronized on CUDA)."""
        if not (swap_out or swap_in or copies):
            return 0.0
        t0 = time.perf_counter()
        self.swap_out(list(swap_out))
        self.swap_in(list(swap_in))
        self.copy(list(copies))
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return (time.perf_counter() - t0) * 1000

    @property
    def block_bytes(self) -> int:
        """Bytes of one block across every layer, keys and values: what a block's hand-off copies."""
        return self.pool[:, :, 0].numel() * self.pool.element_size()

    def export_blocks(self, blocks: list[int], out: memoryview) -> None:
        """Copy `blocks` (every layer, K and V) into `out`, len(blocks) x block_bytes of it, block after block."""
        L, two, _, bs, H, D = self.pool.shape
        dst = torch.frombuffer(out, dtype=self.pool.dtype, count=len(blocks) * self.pool[:, :, 0].numel())
        dst.view(len(blocks), L, two, bs, H, D).copy_(  # (n, L, 2, bs, H, D): a block's bytes are one stretch
            self.pool[:, :, torch.tensor(blocks, device=self.device)].permute(2, 0, 1, 3, 4, 5))

    def import_blocks(self, blocks: list[int], data: memoryview) -> None:
        """Write `data` (export_blocks' layout) into `blocks` of this pool."""
        L, two, _, bs, H, D = self.pool.shape
        src = torch.frombuffer(data, dtype=self.pool.dtype, count=len(blocks) * self.pool[:, :, 0].numel())
        self.pool[:, :, torch.tensor(blocks, device=self.device)] = \
            src.view(len(blocks), L, two, bs, H, D).permute(1, 2, 0, 3, 4, 5).to(self.device)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def copy(self, pairs: list[tuple[int, int]]) -> None:
        """Device block src -> device block dst for each (src, dst) (copy-on-write)."""
        if pairs:
            src, dst = (torch.tensor(x, device=self.device) for x in zip(*pairs))
            self.pool[:, :, dst] = self.pool[:, :, src]

    def swap_out(self, pairs: list[tuple[int, int]]) -> None:
        """Device block -> host block for each (device, host)."""
        if pairs:
            assert self.host is not None, "swap_out on a cache without a host pool"
            dev, host = (torch.tensor(x) for x in zip(*pairs))
            self.host[:, :, host] = self.pool[:, :, dev.to(self.device)].to("cpu")

    def swap_in(self, pairs: list[tuple[int, int]]) -> None:
        """Host block -> device block for each (host, device)."""
        if pairs:
            assert self.host is not None, "swap_in on a cache without a host pool"
            host, dev = (torch.tensor(x) for x in zip(*pairs))
            self.pool[:, :, dev.to(self.device)] = self.host[:, :, host].to(self.device, non_blocking=True)
