"""Engine configuration: one dataclass, checked once, shared by every lane of a run."""
from dataclasses import dataclass

LANES = ("static", "dynamic", "continuous")
POLICIES = ("fcfs", "priority")


@dataclass(frozen=True)
class EngineConfig:
    slots: int = 4                        # rows of the batch (requests computed together per step)
    max_wait: int = 15                    # dynamic lane: steps the oldest waiter may wait before a partial group starts
    policy: str = "fcfs"                  # continuous lane admission order: "fcfs" or "priority"
    chunk_size: int | None = None         # continuous lane: most prompt tokens one request prefills per step (None: whole prompt)
    max_batch_tokens: int | None = None   # continuous lane: most tokens (decode + prefill) computed per step (None: no cap)
    kv_budget: int | None = None          # KV tokens each lane may hold, in blocks of kv_block_size (None: enough for the workload)
    kv_block_size: int = 16               # tokens per KV block
    fused: bool = False                   # one fused forward per step instead of a prefill call plus a decode call

    def __post_init__(self):
        if not isinstance(self.slots, int) or not 1 <= self.slots <= 64:
            raise ValueError(f"slots must be an integer from 1 to 64, got {self.slots!r}")
        if not isinstance(self.max_wait, int) or self.max_wait < 0:
            raise ValueError(f"max_wait must be an integer >= 0, got {self.max_wait!r}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if self.chunk_size is not None and (not isinstance(self.chunk_size, int) or self.chunk_size < 1):
            raise ValueError(f"chunk_size must be an integer >= 1 or unset, got {self.chunk_size!r}")
        if self.max_batch_tokens is not None and (
                not isinstance(self.max_batch_tokens, int) or self.max_batch_tokens < self.slots):
            raise ValueError(f"max_batch_tokens must be an integer >= slots ({self.slots}) so every running "
                             f"request can decode, got {self.max_batch_tokens!r}")
        if not isinstance(self.kv_block_size, int) or not 1 <= self.kv_block_size <= 1024:
            raise ValueError(f"kv_block_size must be an integer from 1 to 1024, got {self.kv_block_size!r}")
        if self.kv_budget is not None and (not isinstance(self.kv_budget, int) or self.kv_budget < self.kv_block_size):
            raise ValueError(f"kv_budget must be an integer >= kv_block_size ({self.kv_block_size}) or unset, "
                             f"got {self.kv_budget!r}")

    @property
    def kv_blocks(self) -> int | None:
        return None if self.kv_budget is None else self.kv_budget // self.kv_block_size
