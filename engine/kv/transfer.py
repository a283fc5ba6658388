"""The wire of a P/D lane: a request's KV blocks copied from a prefill engine's pool into a decode engine's.

`KVChannel` owns one `multiprocessing.shared_memory` segment, sized for the longest prompt's blocks. A hand-off is
two real copies through it, both timed: the prefill runner writes the request's blocks into the segment (every
layer's K and V, block after block), then the decode runner reads them into the blocks of its own pool that the
decode engine's block table names. Both engines live in this process: the segment is what a second process would
map (a prefill worker and a decode worker on one host), so the bytes and the time are a real memory-to-memory copy
of exactly blocks x block bytes, not a network. A served P/D pair (engine/live_pd.py) splits the two halves across
processes: the decode side makes the channel, the prefill worker attaches to its segment by name (`attach`), `send`s
into a region of it, and the decode side `receive`s from that region. On the simulator no K/V exists: nothing is
copied and the time is its cost model's per block (the same as a swap's). It knows runners' block bytes and copies,
nothing of requests, schedulers or clocks.
"""
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import shared_memory


@dataclass(frozen=True)
class Copied:
    blocks: int        # blocks copied
    bytes: int         # blocks x block bytes
    ms: float          # send + receive (measured), or the simulator's cost model
    through: str       # "shared_memory" or "simulated"


class KVChannel:
    def __init__(self, block_bytes: int, max_blocks: int, sim_ms_per_block: float | None = None,
                 attach: str | None = None):
        self.block_bytes = block_bytes          # one block, every layer, K and V
        self.sim_ms_per_block = sim_ms_per_block  # the simulator's cost of a copied block (None: real runners)
        simulated = sim_ms_per_block is not None
        self.simulated = simulated
        # attach: another process's segment, by name (that process made it and unlinks it; this one only maps it)
        self.segment = None if simulated else shared_memory.SharedMemory(
            name=attach, create=attach is None, size=0 if attach else max(1, block_bytes * max_blocks))
        self.bytes_moved = 0                    # through the segment so far (each hand-off once)
        self.closed = weakref.finalize(self, close_segment, self.segment, attach is None)  # at close, or collected

    @property
    def name(self) -> str | None:
        return None if self.segment is None else self.segment.name

    def move(self, src, src_blocks: list[int], dst, dst_blocks: list[int]) -> Copied:
        """Copy `src_blocks` of runner `src`'s pool into `dst_blocks` of runner `dst`'s, through the segment."""
        assert len(src_blocks) == len(dst_blocks), "a hand-off copies block for block"
        n = len(src_blocks)
        size = n * self.block_bytes
        if self.simulated:
            return Copied(n, size, round(self.sim_ms_per_block * n, 3), "simulated")
        ms = self.send(src, src_blocks) + self.receive(dst, dst_blocks)
        self.bytes_moved += size
        return Copied(n, size, round(ms, 3), "shared_memory")

    def send(self, src, src_blocks: list[int], at_block: int = 0) -> float:
        """Write `src_blocks` of runner `src`'s pool into the segment from block `at_block` on; its ms."""
        with self.region(src, len(src_blocks), at_block) as view:
            t0 = time.perf_counter()
            src.export_blocks(src_blocks, view)
            return (time.perf_counter() - t0) * 1000

    def receive(self, dst, dst_blocks: list[int], at_block: int = 0) -> float:
        """Read the segment's blocks from `at_block` on into `dst_blocks` of runner `dst`'s pool; its ms."""
        with self.region(dst, len(dst_blocks), at_block) as view:
            t0 = time.perf_counter()
            dst.import_blocks(dst_blocks, view)
            return (time.perf_counter() - t0) * 1000

    @contextmanager
    def region(self, runner, n: int, at_block: int):
        """The segment's bytes of `n` blocks from block `at_block` on, checked against the runner's layout."""
        start, end = at_block * self.block_bytes, (at_block + n) * self.block_bytes
        assert end <= self.segment.size, "a hand-off beyond the channel's segment"
        assert runner.block_bytes == self.block_bytes, "engines with different KV layouts"
        view = self.segment.buf[start:end]
        try:
            yield view
        finally:
            view.release()

    def close(self) -> None:
        self.closed()


def close_segment(segment, owner: bool = True) -> None:
    if segment is not None:
        segment.close()
        if owner:
            segment.unlink()
