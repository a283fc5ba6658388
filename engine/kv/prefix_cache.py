"""Automatic prefix caching, as vLLM does it: full blocks of prompt tokens, named by a hash chain.

A block of `block_size` tokens is named by hash(parent block's hash, its token ids), so a block's
name says everything before it too: two requests share a cached block only if they share the whole
prefix up to its end. When a request starts (or restarts after a preemption) the scheduler looks
up its longest chain of cached full blocks (`match`) and the request skips computing them; the blocks
it computes itself are added (`add_computed`) once their K/V exist. Blocks held by no running request
stay cached and count as free KV memory: when the lane's budget needs room, the least recently used of
them are evicted (`evict`), the tail of a chain before its head.

On a lane, a cached block's id is the PHYSICAL block of the lane's pool that holds its K/V (the block
manager passes each request's block table to `add_computed`): a hit puts those ids at the head of the new
request's table, shared by reference, never copied. Alone (no table given), ids are small integers of its
own, reused after an eviction. `refs` counts the block tables that hold a cached block (a hit, the request
that computed it, a sibling that forked it); the block manager's own reference counts agree with it. This
module knows no tensors and no slots.
"""
from dataclasses import dataclass, field

from engine.request import Request


@dataclass(eq=False)
class CachedBlock:
    id: int                     # the pool block that holds its K/V (reused after an eviction)
    hash: int                   # hash((parent's hash, token ids)): names the whole prefix up to its end
    token_ids: tuple[int, ...]  # checked on a hit, so a hash collision can never serve the wrong K/V
    depth: int                  # 0 for a prompt's first block
    refs: int = 0               # running requests that hold it
    last_used: int = 0          # the tick it was last released or added (LRU order)
    ready: bool = False         # its K/V exist (a block computed this step becomes ready after the step)


def chain_hashes(token_ids: list[int], block_size: int) -> list[int]:
    """The hash of every full block of `token_ids`, each chained to its parent's."""
    hashes, parent = [], None
    for i in range(len(token_ids) // block_size):
        parent = hash((parent, tuple(token_ids[i * block_size:(i + 1) * block_size])))
        hashes.append(parent)
    return hashes


@dataclass
class PrefixCache:
    block_size: int
    by_hash: dict[int, CachedBlock] = field(default_factory=dict)
    held: dict[str, list[CachedBlock | None]] = field(default_factory=dict)  # request id -> its first blocks, cached
                                                # (None: a block it computed itself whose name another block holds)
    by_id: dict[int, CachedBlock] = field(default_factory=dict)       # the same blocks by pool block id
    computing: list[CachedBlock] = field(default_factory=list)        # added this step: ready after it
    free_ids: list[int] = field(default_factory=list)
    next_id: int = 0
    tick: int = 0
    num_evicted: int = 0        # blocks evicted so far

    @property
    def num_cached(self) -> int:
        return len(self.by_hash)

    @property
    def num_unreferenced(self) -> int:
        """Cached blocks no running request holds: free KV memory that still holds a reusable prefix."""
        return sum(1 for b in self.by_hash.values() if b.refs == 0)

    @property
    def num_shared(self) -> int:
        """Block holdings beyond the first of each block: what the KV budget must not count twice."""
        return sum(b.refs - 1 for b in self.by_hash.values() if b.refs > 1)

    def match(self, request: Request) -> list[CachedBlock]:
        """Take the longest chain of ready cached blocks that starts `request`'s prefill; hold them. At least one
        token is always left to compute: the request needs the logits of its last prompt position."""
        ids = request.prefill_ids
        blocks = []
        for h in chain_hashes(ids[:len(ids) - 1], self.block_size):
            b = self.by_hash.get(h)
            start = len(blocks) * self.block_size
            if b is None or not b.ready or b.token_ids != tuple(ids[start:start + self.block_size]):
                break
            blocks.append(b)
        for b in blocks:
            b.refs += 1
        self.held[request.id] = list(blocks)
        return blocks

    def cached_tokens(self, prompt_ids: tuple[int, ...] | list[int]) -> int:
        """Tokens of a prompt's longest chain of ready cached blocks, looked up without holding them (what a router
        asks a replica, Dynamo's overlap); `match` leaves at least one token to compute, so does this."""
        n = 0
        for h in chain_hashes(list(prompt_ids[:len(prompt_ids) - 1]), self.block_size):
            b = self.by_hash.get(h)
            if b is None or not b.ready or b.token_ids != tuple(prompt_ids[n:n + self.block_size]):
                break
            n += self.block_size
        return n

    def add_computed(self, request: Request, end: int, table: list[int] | None = None) -> list[tuple[int, int]]:
        """Hold every full block of `request`'s prefill that ends at or before position `end` (what this step
        computes up to); a block new to the cache is named by its pool block `table[i]` (alone: an id of its own).
        Returns (block id, first position) of each new block. With a table, a block whose name another pool
        block already holds stays the request's own (None in `held`): the cache keeps one copy of a name."""
        held = self.held.setdefault(request.id, [])
        hashes = chain_hashes(request.prefill_ids[:end], self.block_size)
        new = []
        for i in range(len(held), len(hashes)):
            start = i * self.block_size
            b = self.by_hash.get(hashes[i])
            if b is not None and table is not None and b.id != table[i]:
                held.append(None)
                continue
            if b is None:
                b = CachedBlock(self.take_id() if table is None else table[i], hashes[i],
                                tuple(request.prefill_ids[start:start + self.block_size]), i)
                self.by_hash[b.hash] = b
                self.by_id[b.id] = b
                self.computing.append(b)
                new.append((b.id, start))
            b.refs += 1
            b.last_used = self.tick
            held.append(b)
        return new

    def commit(self) -> None:
        """After a step: the blocks computed in it hold their K/V now."""
        self.tick += 1
        for b in self.computing:
            b.ready = True
        self.computing = []

    def share(self, request: Request, blocks: list[CachedBlock | None]) -> None:
        """`request` holds `blocks` at the head of its table without a hit (a sibling forking its leader's; None:
        a block of the table that is not cached)."""
        for b in blocks:
            if b is not None:
                b.refs += 1
        self.held[request.id] = list(blocks)

    def drop(self, request: Request, block_id: int) -> None:
        """`request` no longer holds cached block `block_id` (it copied it before writing into it)."""
        held = self.held.get(request.id, [])
        for i, b in enumerate(held):
            if b is not None and b.id == block_id:
                b.refs -= 1
                b.last_used = self.tick
                held[i] = None

    def release(self, request: Request) -> None:
        """`request` left its slot (returned or preempted): its blocks stay cached, held by one request fewer."""
        for b in self.held.pop(request.id, []):
            if b is not None:
                b.refs -= 1
                b.last_used = self.tick

    def evict(self, n: int) -> list[int]:
        """Forget the `n` least recently used blocks that no running request holds (deepest first on a tie); return
        their ids (free pool blocks again)."""
        victims = sorted((b for b in self.by_hash.values() if b.refs == 0), key=lambda b: (b.last_used, -b.depth))
        assert len(victims) >= n, "evicting more cached blocks than are free"
        self.num_evicted += n
        for b in victims[:n]:
            del self.by_hash[b.hash]
            del self.by_id[b.id]
            if self.next_id:  # alone, its own ids are reused; on a lane the pool block goes back to the block manager
                self.free_ids.append(b.id)
        return [b.id for b in victims[:n]]

    def take_id(self) -> int:
        if self.free_ids:
            return self.free_ids.pop()
        self.next_id += 1
        return self.next_id - 1
