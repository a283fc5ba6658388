"""The runner's side of the prefix cache while the scheduler hands out no block tables: cached blocks kept aside.

Without tables a slot's blocks (`paged.table_of`) are reused by the next request in the slot, so a block that the
prefix cache keeps is copied out of the pool after the step that computed it (`save`), and copied into the pool
blocks of a request that hits it before that request's first computed step (`load`). Each block is kept as one
tensor `(layers, 2, block_size, kv_heads, head_dim)` under the id `prefix_cache.PrefixCache` gave it; an evicted
block's id is reused, so its tensor is simply overwritten. Which blocks to copy, and when, is the scheduler's
decision (`Row.load`, `Row.save`); this module only copies. It does not know hashes, eviction or which request a
block belongs to (`prefix_cache.py` does).
"""
from typing import Callable

import torch

from .kv_cache import PagedKVCache
from .batch import Row


class BlockStore:
    def __init__(self, block_size: int):
        self.block_size = block_size
        self.blocks: dict[int, torch.Tensor] = {}  # block id -> (L, 2, block_size, H, D)

    def load(self, cache: PagedKVCache, rows: list[Row], table: Callable[[Row, int], tuple[int, ...]]) -> None:
        """Copy each row's cached prefix blocks into the pool blocks of its table, at their positions."""
        for row in rows:
            for block_id, start in row.load:
                cache.pool[:, :, table(row, row.slot)[start // self.block_size]] = self.blocks[block_id]

    def save(self, cache: PagedKVCache, rows: list[Row], table: Callable[[Row, int], tuple[int, ...]]) -> None:
        """Keep a copy of each row's newly computed full prompt blocks, under their ids."""
        for row in rows:
            for block_id, start in row.save:
                self.blocks[block_id] = cache.pool[:, :, table(row, row.slot)[start // self.block_size]].clone()
