"""KV memory accounting in fixed-size blocks, as a paged-attention server hands out memory.

The block manager decides whether a request's KV rows may grow; the tensors themselves live in
`kv_cache.SlotKVCache`, one preallocated row per slot. With no budget it still counts blocks (for
the memory bar) but never refuses. With a prefix cache (`prefix_cache.PrefixCache`), a cached block
that several running requests hold counts once, and cached blocks that no request holds count as free:
they are evicted, least recently used first, when a request needs their room.
"""
from .prefix_cache import PrefixCache
from .request import Request


def blocks_for(num_tokens: int, block_size: int) -> int:
    return -(-num_tokens // block_size)


class BlockManager:
    def __init__(self, num_blocks: int | None, block_size: int, prefix: PrefixCache | None = None):
        self.num_blocks = num_blocks    # None: unlimited
        self.block_size = block_size
        self.held: dict[str, int] = {}  # request id -> blocks it holds (its cached prefix blocks included)
        self.prefix = prefix            # the lane's prefix cache, if it has one

    @property
    def num_used(self) -> int:
        """Blocks the running requests hold, a shared cached block once."""
        return sum(self.held.values()) - (self.prefix.num_shared if self.prefix else 0)

    @property
    def num_free(self) -> int | None:
        return None if self.num_blocks is None else self.num_blocks - self.num_used

    def extra_blocks(self, request: Request, num_tokens: int) -> int:
        """Blocks `request` must add so that its row can hold `num_tokens` tokens."""
        return max(0, blocks_for(num_tokens, self.block_size) - self.held.get(request.id, 0))

    def can_grow(self, request: Request, num_tokens: int, reserved: int = 0) -> bool:
        free = self.num_free
        return free is None or self.extra_blocks(request, num_tokens) <= free - reserved

    def grow(self, request: Request, num_tokens: int) -> None:
        assert self.can_grow(request, num_tokens), "KV block budget exceeded"
        extra = self.extra_blocks(request, num_tokens)
        if self.prefix and self.num_blocks is not None:  # take the room of unheld cached blocks if it is needed
            self.prefix.evict(max(0, extra - (self.num_free - self.prefix.num_unreferenced)))
        self.held[request.id] = self.held.get(request.id, 0) + extra

    def hold_cached(self, request: Request, num_blocks: int) -> None:
        """`request` starts with `num_blocks` cached blocks (a prefix cache hit): held, not allocated."""
        assert self.held.get(request.id, 0) == 0, "a prefix hit on a row that already holds blocks"
        self.held[request.id] = num_blocks

    def free(self, request: Request) -> None:
        self.held.pop(request.id, None)
        if self.prefix:
            self.prefix.release(request)
