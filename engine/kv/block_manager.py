"""The KV allocator: a pool of physical blocks, a block table per request, reference counts, a free list.

Every lane has one pool of `num_blocks` blocks of `block_size` tokens (its KV budget's blocks, or enough for
what its requests can need). A request's K/V at position p lives in block `tables[id][p // block_size]` at
offset `p % block_size`; the runner reads and writes K/V only through these tables. A block may be held by
several tables (a prefix-cache hit, siblings of one prompt): `refs` counts them, and a request about to write
into a shared block first gets a copy of its own (copy-on-write: a `(src, dst)` op). Cached prompt blocks no
table holds stay in the prefix cache (`prefix_cache.PrefixCache`, which names pool blocks): they count as free
and are evicted, least recently used first, when a block is needed.

`kv_allocation`: "paged" grows a table one block at a time; "reserve" gives a request, when it starts, blocks
for its prompt plus max_new_tokens (how servers reserved before paging). A swap lane also has a host pool of
`host_blocks`: `swap_out` copies a victim's blocks there and frees them, `swap_in` copies them back to fresh
device blocks. Without a budget (`budgeted=False`) the pool never refuses a request (it is sized so that it
need not). This module knows requests' lengths, nothing of slots, policies or tensors.
"""
from engine.config import EngineConfig
from engine.kv.prefix_cache import PrefixCache
from engine.request import Request
from engine.spec import RequestSpec, max_row_len, row_capacity


def blocks_for(num_tokens: int, block_size: int) -> int:
    return -(-num_tokens // block_size)


def lane_blocks(config: EngineConfig, specs: list[RequestSpec], prefix: PrefixCache | None) -> "BlockManager":
    """A lane's allocator: its KV budget's blocks, or (no budget) enough for every slot to hold its longest
    request; a swap lane's host pool as large as its device pool."""
    budgeted = config.kv_blocks is not None
    num_blocks = config.kv_blocks if budgeted else \
        config.slots * blocks_for(row_capacity(specs) if specs else config.kv_block_size, config.kv_block_size)
    host = num_blocks if config.preemption == "swap" else 0
    return BlockManager(num_blocks, config.kv_block_size, prefix, host_blocks=host, budgeted=budgeted,
                        reserve=config.kv_allocation == "reserve")


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, prefix: PrefixCache | None = None, host_blocks: int = 0,
                 budgeted: bool = True, reserve: bool = False):
        self.num_blocks = num_blocks                     # the device pool: blocks 0 .. num_blocks - 1
        self.block_size = block_size
        self.prefix = prefix                             # the lane's prefix cache, if it has one
        self.budgeted = budgeted                         # False: never refuses (the pool is sized for the lane)
        self.reserve = reserve                           # kv_allocation "reserve": whole requests at admission
        self.refs = [0] * num_blocks                     # block -> block tables that hold it
        self.free_ids = list(range(num_blocks - 1, -1, -1))  # neither held nor cached (a stack: block 0 first)
        self.tables: dict[str, list[int]] = {}           # request id -> its device block table
        self.host_blocks = host_blocks                   # the host pool a swap lane copies victims' blocks to
        self.host_free = list(range(host_blocks - 1, -1, -1))
        self.host_tables: dict[str, list[int]] = {}      # request id -> its swapped-out blocks, in table order
        # what changed since the lane last recorded (`take_changes`): the step record's kv_* deltas
        self.changed: set[str] = set()                   # device tables changed
        self.dropped: set[str] = set()                   # device tables released
        self.host_changed: set[str] = set()              # host holdings changed

    # -- what the lane and the policies read --------------------------------------------------------
    @property
    def held(self) -> dict[str, int]:
        """Request id -> blocks its table holds."""
        return {rid: len(t) for rid, t in self.tables.items()}

    @property
    def num_used(self) -> int:
        """Blocks some table holds (a shared block once)."""
        return self.num_blocks - len(self.free_ids) - self.num_cached_free

    @property
    def num_free(self) -> int | None:
        """Blocks a request may still take (free, or cached and held by no table); None: never refuses."""
        return len(self.free_ids) + self.num_cached_free if self.budgeted else None

    @property
    def num_cached_free(self) -> int:
        return sum(1 for b in self.prefix.by_id if self.refs[b] == 0) if self.prefix else 0

    def cached_free(self) -> list[int]:
        """Cached blocks no table holds (evictable), sorted."""
        return sorted(b for b in self.prefix.by_id if self.refs[b] == 0) if self.prefix else []

    def shared_tokens(self) -> int:
        """Token slots counted twice if every table's tokens were summed: a block held by k tables, k - 1 times."""
        return sum(n - 1 for n in self.refs if n > 1) * self.block_size

    def target(self, spec: RequestSpec, num_tokens: int) -> int:
        """Tokens a table must cover for its request to hold `num_tokens` (reserve: at least its whole maximum)."""
        return max(num_tokens, max_row_len(spec)) if self.reserve else num_tokens

    def must_copy(self, request: Request) -> bool:
        """Whether `request`'s next write (at position num_cached) lands in a block it shares (copy-on-write)."""
        table = self.tables.get(request.id, ())
        i = request.num_cached // self.block_size
        return i < len(table) and (self.refs[table[i]] > 1 or self.is_cached(table[i]))

    def is_cached(self, block: int) -> bool:
        return self.prefix is not None and block in self.prefix.by_id

    def extra_blocks(self, request: Request, num_tokens: int) -> int:
        """Blocks `request` must take so that its table covers `num_tokens` tokens (a copy-on-write included)."""
        grow = max(0, blocks_for(self.target(request.spec, num_tokens), self.block_size)
                   - len(self.tables.get(request.id, ())))
        return grow + (num_tokens > request.num_cached and self.must_copy(request))

    def can_grow(self, request: Request, num_tokens: int, reserved: int = 0) -> bool:
        free = self.num_free
        return free is None or self.extra_blocks(request, num_tokens) <= free - reserved

    def fork_need(self, spec: RequestSpec, shared_tokens: int, num_tokens: int) -> int:
        """Blocks a sibling takes that forks `shared_tokens` of its leader's table and then holds `num_tokens`."""
        shared = blocks_for(shared_tokens, self.block_size)
        grow = max(0, blocks_for(self.target(spec, num_tokens), self.block_size) - shared)
        return grow + (shared_tokens % self.block_size != 0 and num_tokens > shared_tokens)

    # -- allocation ---------------------------------------------------------------------------------
    def take(self) -> int:
        """A block for a table: a free one, else the least recently used cached block no table holds."""
        if not self.free_ids:
            assert self.prefix is not None, "KV pool exhausted"
            self.free_ids += self.prefix.evict(1)
        block = self.free_ids.pop()
        assert self.refs[block] == 0
        self.refs[block] = 1
        return block

    def unref(self, block: int) -> None:
        self.refs[block] -= 1
        assert self.refs[block] >= 0
        if self.refs[block] == 0 and not self.is_cached(block):
            self.free_ids.append(block)

    def grow(self, request: Request, num_tokens: int) -> list[tuple[int, int]]:
        """Extend `request`'s table to cover `num_tokens` tokens; returns the copy-on-write ops (src, dst) to apply
        before the forward writes."""
        assert self.can_grow(request, num_tokens), "KV block budget exceeded"
        table = self.tables.setdefault(request.id, [])
        copies = []
        if num_tokens > request.num_cached and self.must_copy(request):
            i = request.num_cached // self.block_size
            src, dst = table[i], self.take()  # take first: src may be an evictable cached block once unreferenced
            table[i] = dst
            if self.is_cached(src) and self.prefix:
                self.prefix.drop(request, src)
            self.unref(src)
            copies.append((src, dst))
        need = blocks_for(self.target(request.spec, num_tokens), self.block_size) - len(table)
        table += [self.take() for _ in range(max(0, need))]
        if copies or need > 0:
            self.changed.add(request.id)
        return copies

    def hold_cached(self, request: Request, blocks: list[int]) -> None:
        """`request` starts with cached `blocks` (a prefix cache hit): shared by reference, not copied."""
        assert not self.tables.get(request.id), "a prefix hit on a table that already holds blocks"
        for b in blocks:
            self.refs[b] += 1
        self.tables[request.id] = list(blocks)
        if blocks:
            self.changed.add(request.id)

    def fork(self, sibling: Request, leader: Request, num_tokens: int) -> None:
        """`sibling` shares the blocks of `leader`'s table that cover its first `num_tokens` tokens. It holds in the
        prefix cache those of them that are cached, read from the blocks themselves, not from the leader's holdings: a
        swapped-in leader holds uncached copies and no holdings, and a sibling whose holdings stopped short would
        name the blocks they share as its own when it computes its last prompt token."""
        assert not self.tables.get(sibling.id), "a fork into a table that already holds blocks"
        blocks = self.tables[leader.id][:blocks_for(num_tokens, self.block_size)]
        self.hold_cached(sibling, blocks)
        if self.prefix:
            self.prefix.share(sibling, [self.prefix.by_id.get(b) for b in blocks])

    def free(self, request: Request) -> None:
        """`request` left its slot (finished, preempted, swapped out, cancelled): its table is released."""
        table = self.tables.pop(request.id, None)
        if self.prefix:
            self.prefix.release(request)
        if table is None:
            return
        for b in table:
            self.unref(b)
        self.changed.discard(request.id)
        self.dropped.add(request.id)

    # -- swapping (preemption "swap") ----------------------------------------------------------------
    def can_swap_out(self, request: Request) -> bool:
        return 0 < len(self.tables.get(request.id, ())) <= len(self.host_free)

    def swap_out(self, request: Request) -> list[tuple[int, int]]:
        """Copy `request`'s blocks to host blocks and free them; returns the ops (device block, host block)."""
        assert self.can_swap_out(request)
        table = self.tables[request.id]
        host = [self.host_free.pop() for _ in table]
        ops = list(zip(table, host))
        self.free(request)
        self.host_tables[request.id] = host
        self.host_changed.add(request.id)
        return ops

    def is_swapped(self, request: Request) -> bool:
        return request.id in self.host_tables

    def swap_in_need(self, request: Request, num_tokens: int) -> int:
        """Device blocks `request` (swapped out) takes to resume and hold `num_tokens` tokens."""
        return max(len(self.host_tables[request.id]),
                   blocks_for(self.target(request.spec, num_tokens), self.block_size))

    def swap_in(self, request: Request) -> list[tuple[int, int]]:
        """Copy `request`'s host blocks back to fresh device blocks; returns the ops (host block, device block)."""
        host = self.host_tables.pop(request.id)
        assert not self.tables.get(request.id)
        self.tables[request.id] = [self.take() for _ in host]
        self.host_free += reversed(host)
        self.changed.add(request.id)
        self.host_changed.add(request.id)
        return list(zip(host, self.tables[request.id]))

    def forget(self, request: Request) -> None:
        """A swapped-out request that will never resume (cancelled): its host blocks are free again."""
        host = self.host_tables.pop(request.id, None)
        if host is not None:
            self.host_free += reversed(host)
            self.host_changed.add(request.id)

    def take_changes(self) -> tuple[dict[str, list[int]], tuple[str, ...], dict[str, int]]:
        """(changed tables, dropped requests, changed host holdings) since the last call: the record's deltas."""
        tables = {rid: list(self.tables[rid]) for rid in sorted(self.changed) if rid in self.tables}
        swapped = {rid: len(self.host_tables.get(rid, ())) for rid in sorted(self.host_changed)}
        dropped = tuple(sorted(self.dropped))
        self.changed, self.dropped, self.host_changed = set(), set(), set()
        return tables, dropped, swapped
