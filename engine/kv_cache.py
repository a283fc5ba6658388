"""A real per-slot KV cache that transformers' Llama-style models write into.

One preallocated row per slot and layer, `[slots, kv_heads, row_len + 1, head_dim]`; every row has
its own length, so a request can join an empty row while its neighbours are deep into decoding
(transformers' `StaticCache` keeps one length for all rows, which does not fit). Before each forward
the runner calls `plan()` with the rows it computes and where each query token's K/V goes; the
model's attention layers then call `update()`, which writes there and returns each row's K/V up to
the longest row in the call (or, after `plan_packed()`, every row's K/V gathered into one sequence). The last column is scratch: padded query positions write there and no
query ever reads it.

This module knows nothing about requests or scheduling: rows are slot indices.
"""
import torch
from transformers.cache_utils import Cache, CacheLayerMixin


class SlotLayer(CacheLayerMixin):
    """The K/V of one decoder layer for every slot."""

    def __init__(self, cache: "SlotKVCache", shape: tuple[int, int, int, int], dtype: torch.dtype, device):
        super().__init__()
        self.cache = cache
        self.keys = torch.zeros(shape, dtype=dtype, device=device)    # (S, H, L + 1, D)
        self.values = torch.zeros(shape, dtype=dtype, device=device)  # (S, H, L + 1, D)
        self.is_initialized = True
        self.device = device

    def lazy_initialization(self, key_states, value_states) -> None:  # preallocated in __init__
        pass

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        c = self.cache
        # key_states: (B, H, Q, D) -> (B, Q, H, D) to match keys[rows, :, positions] indexing
        self.keys[c.rows_index, :, c.write_pos] = key_states.transpose(1, 2)
        self.values[c.rows_index, :, c.write_pos] = value_states.transpose(1, 2)
        if c.read is not None:  # packed: the rows' K/V one after another, (T, H, D) -> (1, H, T, D)
            slots, cols = c.read
            return self.keys[slots, :, cols].transpose(0, 1)[None], self.values[slots, :, cols].transpose(0, 1)[None]
        if c.row_slice is not None:  # contiguous rows: a view, no copy
            return self.keys[c.row_slice, :, :c.kv_len], self.values[c.row_slice, :, :c.kv_len]
        return self.keys[c.rows, :, :c.kv_len], self.values[c.rows, :, :c.kv_len]  # (B, H, kv_len, D)

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.cache.kv_len, 0

    def get_seq_length(self) -> int:
        return self.cache.kv_len

    def get_max_length(self) -> int:
        return self.keys.shape[2] - 1


class SlotKVCache(Cache):
    def __init__(self, num_layers: int, slots: int, kv_heads: int, row_len: int, head_dim: int,
                 dtype: torch.dtype, device):
        self.slots = slots
        self.row_len = row_len              # tokens a row can hold; column row_len is the scratch column
        shape = (slots, kv_heads, row_len + 1, head_dim)
        super().__init__(layers=[SlotLayer(self, shape, dtype, device) for _ in range(num_layers)])
        self.device = device
        self.plan([0], torch.zeros(1, 1, dtype=torch.long), 1)

    @property
    def scratch(self) -> int:
        return self.row_len

    def plan(self, rows: list[int], write_pos: torch.Tensor, kv_len: int) -> None:
        """Set where the next forward writes: batch row b is slot rows[b]; its query token q goes to
        column write_pos[b, q]; attention reads columns [0, kv_len) of each row."""
        self.rows = torch.tensor(rows, device=self.device)                 # (B,)
        self.rows_index = self.rows[:, None]                               # (B, 1), broadcasts with write_pos
        self.write_pos = write_pos.to(self.device)                         # (B, Q)
        contiguous = rows == list(range(rows[0], rows[0] + len(rows)))
        self.row_slice = slice(rows[0], rows[0] + len(rows)) if contiguous else None
        self.kv_len = kv_len
        self.read = None

    def plan_packed(self, slots: torch.Tensor, write_pos: torch.Tensor, read_slots: torch.Tensor,
                    read_pos: torch.Tensor) -> None:
        """Set a packed forward, a batch of one sequence holding every row's tokens without padding: token m
        belongs to slot slots[m] and goes to column write_pos[m]; attention reads the K/V of slot
        read_slots[t], column read_pos[t], for t in [0, T) (each row's columns, one row after another)."""
        self.rows_index = slots.to(self.device)[None]     # (1, M)
        self.write_pos = write_pos.to(self.device)[None]  # (1, M)
        self.read = (read_slots.to(self.device), read_pos.to(self.device))  # (T,), (T,)
        self.row_slice = None
        self.kv_len = len(read_pos)
