"""The step-clock simulator: the same schedulers and lanes, no model, step times from a cost model.

`SimRunner` stands in for `runner.ModelRunner`: every token it writes is a placeholder and every step lasts what
`sim_call_ms` says. Each placeholder reads as one word of a fixed vocabulary of 64 (`sim_word`: the CRC-32 of the
prompt's ids and the token's position picks it), so the same prompt always gets the same text, and stop strings,
streams and the page have text to show: SIMULATED words, never the model's. `sim_prompt_ids` and `estimate_prompt_tokens` stand in for the tokenizer. No torch, so a web
process can estimate prompt tokens with it.

`SimNoise` (off unless given) makes the cost model noisy, as a busy machine's measured steps are: seeded, so a test
can replay the same noise, and with single calls forced longer or shorter, so it can push a lesson's claim either way.

What it does not know: real tokens or text (its words mean nothing), real time (the lane clock adds up the cost
model), policies (it computes the rows it is given).
"""
import random
import zlib
from array import array
from dataclasses import dataclass, field

from engine.sched.batch import ForwardResult, Row, call_kind
from engine.request import Request
from engine.step import Forward, SlotState


SIM_TOKEN = -1  # the simulator's placeholder token id
# The simulator's cost model, a rough straight line through this CPU's measured steps (float32, 2 cores): every
# forward call reads all the weights (~60 ms), and each token position it computes adds ~1.5 ms (a prefill
# of 400 tokens ~0.66 s; a decode call of 16 rows ~85 ms). Rows of a call are padded to its longest.
SIM_CALL_MS = 60.0
SIM_TOKEN_MS = 1.5
# A copied KV block (swap out, swap in, copy-on-write): the default model's block of 16 tokens in float32 is
# 30 layers x K and V x 3 heads x 16 x 64 x 4 bytes = 737 kB, at a few GB/s of memory bandwidth ~0.15 ms.
SIM_COPY_MS_PER_BLOCK = 0.15
SIM_KV_BYTES_PER_TOKEN = 30 * 2 * 3 * 64 * 4  # the default model's K/V of one token in float32: what kv_bytes reports
# The simulator's words: what its placeholder tokens read as (64, so a CRC picks one evenly; no word inside another)
SIM_WORDS = (
    "amber", "basil", "cedar", "delta", "ember", "fjord", "grove", "harbor", "indigo", "juniper", "kelp", "lagoon",
    "meadow", "nectar", "orchid", "pebble", "quartz", "raven", "saffron", "tundra", "umber", "violet", "willow",
    "xenon", "yarrow", "zephyr", "anchor", "bramble", "cobalt", "dune", "falcon", "glacier", "hazel", "iris",
    "jasper", "kestrel", "lichen", "maple", "nimbus", "oasis", "prairie", "quill", "ridge", "sequoia", "thistle",
    "upland", "vapor", "wren", "yonder", "zinnia", "aspen", "beacon", "canyon", "drift", "estuary", "flint",
    "garnet", "heron", "inlet", "jade", "knoll", "lumen", "mesa", "north")


def sim_call_ms(rows: list[Row]) -> float:
    return SIM_CALL_MS + SIM_TOKEN_MS * len(rows) * max(len(r.token_ids) for r in rows)


@dataclass(frozen=True)
class SimNoise:
    """Injected step-time noise (tests only; every simulated figure is unchanged without it). Each call of a lane's
    runner is multiplied by a factor drawn uniformly from [1 - spread, 1 + spread] by the seeded stream of
    (seed, lane), then by `force[(lane, call)]` if given (call: the lane's runner calls counted from 1)."""
    seed: int = 0
    spread: float = 0.0                                               # 0.2: each call within +-20% of its cost
    force: dict[tuple[str, int], float] = field(default_factory=dict)  # (lane, call) -> a factor on that call

    def __post_init__(self):
        if not 0 <= self.spread < 1:
            raise ValueError(f"SimNoise.spread must be in [0, 1), got {self.spread}")

    def factors(self, lane: str):
        """The factor of each call of `lane`'s runner, in order (an endless iterator)."""
        stream, call = random.Random(f"{self.seed}:{lane}"), 0
        while True:
            call += 1
            yield (1 + stream.uniform(-self.spread, self.spread)) * self.force.get((lane, call), 1.0)


class SimRunner:
    """The step-clock simulator: the same schedulers, no model. Every token is the placeholder id -1 and every
    step lasts what the cost model above says (a split step is two calls, a fused one a single call)."""
    simulated = True

    def __init__(self, slots: int, num_blocks: int, block_size: int, host_blocks: int = 0, fused: bool = False,
                 noise=None):
        self.num_blocks = num_blocks      # the device pool (ModelRunner's layout, no tensors)
        self.block_size = block_size
        self.host_blocks = host_blocks    # the host pool a swap lane copies blocks out to
        self.fused = fused
        self.noise = noise  # None, or an iterator of factors (SimNoise.factors): each call's time is multiplied
        self.kv_bytes = num_blocks * block_size * SIM_KV_BYTES_PER_TOKEN  # what the default model would allocate
        self.block_bytes = block_size * SIM_KV_BYTES_PER_TOKEN  # ...per block: what a P/D hand-off would copy of one

    def run(self, rows: list[Row], swap_out=(), swap_in=(), copies=()) -> ForwardResult:
        for r in rows:  # every position the row holds has a block of the pool
            assert len(r.blocks) * self.block_size >= r.start + len(r.token_ids), "row longer than its block table"
            assert all(0 <= b < self.num_blocks for b in r.blocks), "block id outside the pool"
        assert all(0 <= d < self.num_blocks and 0 <= h < self.host_blocks for d, h in swap_out), "swap_out outside a pool"
        assert all(0 <= d < self.num_blocks and 0 <= h < self.host_blocks for h, d in swap_in), "swap_in outside a pool"
        copy_ms = SIM_COPY_MS_PER_BLOCK * (len(swap_out) + len(swap_in) + len(copies))
        if not rows:
            return ForwardResult({}, 0.0, Forward.NONE, copy_ms=copy_ms)
        prefills = [r for r in rows if r.state is SlotState.PREFILL]
        decodes = [r for r in rows if r.state is not SlotState.PREFILL]
        if self.fused and prefills and decodes:  # one packed call: no padding between rows
            ms, kind = SIM_CALL_MS + SIM_TOKEN_MS * sum(len(r.token_ids) for r in rows), Forward.FUSED
        else:
            calls = [c for c in (prefills, decodes) if c]
            ms = sum(sim_call_ms(c) for c in calls)
            kind = call_kind(len(calls), bool(prefills))
        if self.noise is not None:
            ms *= next(self.noise)
        return ForwardResult({r.slot: SIM_TOKEN for r in rows if r.wants_token}, ms, kind, copy_ms=copy_ms)

    def reference_ms(self) -> float:
        return SIM_CALL_MS + SIM_TOKEN_MS

    def is_special(self, token_id: int) -> bool:
        return False

    def text_delta(self, request: Request, upto: int | None = None, final: bool = False) -> str:
        """The words `request`'s newest tokens (those before `upto`) add: one word per token, space-separated."""
        end = len(request.output_ids) if upto is None else upto
        if end <= request.text_read:
            return ""
        seed = zlib.crc32(array("q", request.spec.prompt_ids).tobytes())
        delta = "".join((" " if i else "") + sim_word(seed, i) for i in range(request.text_read, end))
        request.text_prefix = request.text_read = end
        request.text += delta
        return delta


def sim_word(seed: int, position: int) -> str:
    """The word the simulator's token at `position` of an answer reads as (`seed`: the CRC-32 of its prompt's ids)."""
    return SIM_WORDS[zlib.crc32(position.to_bytes(4, "little"), seed) % len(SIM_WORDS)]


def estimate_prompt_tokens(prompt: str) -> int:
    """The simulator's stand-in for a tokenizer: about 4 bytes per token plus a chat template's ~30."""
    return 30 + len(prompt.encode()) // 4


def sim_prompt_ids(prompt: str) -> list[int]:
    """The simulator's placeholder prompt ids, `estimate_prompt_tokens` of them: the template's 30 the same for
    every prompt, then one id per 4 bytes of the prompt, so prompts that share a beginning share a prefix
    (what the prefix cache looks for)."""
    data = prompt.encode()
    return list(range(1, 31)) + [1 + int.from_bytes(data[i:i + 4], "little") % 49151
                                 for i in range(0, len(data) - 3, 4)]
