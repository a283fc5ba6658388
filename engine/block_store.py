"""The runner's side of the prefix cache: the K/V of cached blocks, kept outside the slot rows.

The slot rows of `kv_cache.SlotKVCache` are reused by the next request in the slot, so a block that the
prefix cache keeps is copied out of its row after the step that computed it (`save`), and copied into
the row of a request that hits it before that request's first computed step (`load`). Each block is
kept as one tensor `(layers, 2, kv_heads, block_size, head_dim)` under the id `prefix_cache.PrefixCache`
gave it; an evicted block's id is reused, so its tensor is simply overwritten. Which blocks to copy,
and when, is the scheduler's decision (`Row.load`, `Row.save`); this module only copies. It does not know
hashes, eviction or which request a block belongs to (`prefix_cache.py` does).
"""
import torch

from .kv_cache import SlotKVCache
from .batch import Row


class BlockStore:
    def __init__(self, block_size: int):
        self.block_size = block_size
        self.blocks: dict[int, torch.Tensor] = {}  # block id -> (L, 2, H, block_size, D)

    def load(self, cache: SlotKVCache, rows: list[Row]) -> None:
        """Copy each row's cached prefix blocks into its slot's row, at their positions."""
        for row in rows:
            for block_id, start in row.load:
                kv = self.blocks[block_id]
                for i, layer in enumerate(cache.layers):
                    layer.keys[row.slot, :, start:start + self.block_size] = kv[i, 0]
                    layer.values[row.slot, :, start:start + self.block_size] = kv[i, 1]

    def save(self, cache: SlotKVCache, rows: list[Row]) -> None:
        """Keep a copy of each row's newly computed full prompt blocks, under their ids."""
        for row in rows:
            for block_id, start in row.save:
                end = start + self.block_size
                self.blocks[block_id] = torch.stack([torch.stack((layer.keys[row.slot, :, start:end],
                                                                  layer.values[row.slot, :, start:end]))
                                                     for layer in cache.layers])  # (L, 2, H, block_size, D)
