"""The vLLM lane: a workload's requests through a real vLLM V1 engine (engine/peers/vllm_bridge.py, its own process),
each `engine.step()` written down as a StepRecord in our vocabulary, on the lane's own clock.

    (add arrivals) -> bridge step (vLLM schedules and computes) -> cells in stable slots -> record

Slots are ours: a request vLLM schedules for the first time (or again after a preemption) takes the lowest free
slot, keeps it while it runs, and frees it the step after it finished or was preempted. A cell is a prefill
(chunk progress: tokens computed of the tokens to read, the prompt, or prompt and output after a preemption),
a decode, or a preempted cell. Arrivals and the clock follow engine/lane.py's rules. It computes only when its
`step()` is called (lockstep with the other lanes); it knows no vLLM internals (the bridge reads them).
"""
import bisect
import statistics
import weakref
from dataclasses import dataclass, field

from engine.config import LaneSpec
from engine.spec import RequestSpec
from engine.step import Forward, SlotRecord, SlotState, StepRecord, StopReason
from engine.peers.vllm_options import engine_args
from engine.peers.vllm_process import acquire, release
from engine.worker.detok import next_text

FINISH = {"stop": StopReason.EOS, "length": StopReason.LENGTH, "abort": StopReason.CANCELLED}


@dataclass
class VllmRequest:
    """One request as the vLLM lane tracks it (the scheduler's `Request` fields the benchmarks and sweeps read)."""
    spec: RequestSpec
    key: str                                 # the id the bridge knows it by ("r" + its index)
    slot: int | None = None
    added: bool = False                      # handed to vLLM (it arrived on the lane clock)
    prefill_total: int | None = None         # tokens its current (re)start reads before it writes again
    output_ids: list[int] = field(default_factory=list)
    text: str = ""
    text_prefix: int = 0        # engine.worker.detok's offsets: where the next decode's window starts...
    text_read: int = 0          # ...and the tokens whose text is in `text`
    stop: StopReason | None = None
    num_preemptions: int = 0

    @property
    def id(self) -> str:
        return self.spec.id


class VllmLane:
    """A Lane-like lane (name, records, clock, done, step()) whose scheduler and model are vLLM's."""

    def __init__(self, spec: LaneSpec, requests: list[RequestSpec], timed: bool, lm, model_folder: str,
                 bridge=None, place=None):
        """`bridge`: a started bridge its owner keeps and ends (an engine of a P/D pair: engine/peers/vllm_pd_lane.py);
        None: the lane takes a warm bridge for its arguments, or starts one, and gives it back when done. `place`:
        placement(processes, transport) (engine/report/placement.py, handed in by the engine: peers sit below report),
        for a lane whose engine is split over worker processes."""
        self.name, self.spec, self.timed, self.lm = spec.name, spec, timed, lm
        self.slots: list[VllmRequest | None] = [None] * spec.config.slots
        self.requests = [VllmRequest(s, f"r{i}") for i, s in enumerate(requests)]
        self.by_key = {r.key: r for r in self.requests}
        self.records: list[StepRecord] = []
        self.clock = 0.0
        self.measured: list[float] = []
        self.args, self.model_folder = engine_args(spec), model_folder
        self.owned = bridge is None
        self.bridge = acquire(model_folder, self.args) if self.owned else bridge  # vLLM's start (~60 s), before step 1
        self.abandon = weakref.finalize(self, self.bridge.close)  # a run dropped mid-way (stopped, failed) ends it
        if not self.owned:
            self.abandon.detach()
        info = self.bridge.info
        self.kv_blocks, self.block_size = info["kv_blocks"], info["block_size"]
        self.vllm_config, self.reference_ms = info["config"], info["reference_ms"]
        self.finished = 0
        self.kv_io: dict | None = None
        self.placement = split_placement(info.get("workers") or [], self.bridge.proc.pid, place) if place else None

    @property
    def policy(self) -> str:
        return self.spec.policy

    @property
    def done(self) -> bool:
        return self.finished == len(self.requests)

    def arrive(self) -> None:
        """Hand vLLM the requests that arrived by now on the lane clock (ms) or by this step (steps)."""
        step = len(self.records)
        for r in self.requests:
            if not r.added and (r.spec.arrival_ms <= self.clock if self.timed else r.spec.arrival <= step):
                s = r.spec
                self.bridge.call({"op": "add", "id": r.key, "prompt_ids": list(s.prompt_ids),
                                  "max_new_tokens": s.max_new_tokens, "ignore_eos": s.ignore_eos,
                                  "temperature": s.temperature, "top_p": s.top_p, "seed": s.seed}, "adding a request")
                r.added = True

    def step(self) -> StepRecord | None:
        if self.done:
            return None
        self.arrive()
        if self.timed and not any(r.added and r.stop is None for r in self.requests):
            self.clock = min(r.spec.arrival_ms for r in self.requests if not r.added)  # wait for the next arrival
            self.arrive()
        start = self.clock
        answer = self.bridge.call({"op": "step"})
        self.kv_io = answer.get("kv_io")   # an engine of a P/D pair: what its KV connector moved in this step
        if self.kv_io:  # the connector's save and load are drawn as the transfer (vllm_pd_lane.py), not as this step
            start = round(start + self.kv_io["load_ms"], 3)
            answer["ms"] = max(0.0, answer["ms"] - self.kv_io["save_ms"] - self.kv_io["load_ms"])
        if answer["scheduled"]:
            ms = round(answer["ms"], 3)
            bisect.insort(self.measured, ms)
        elif answer.get("dispatched"):  # a pipeline's step that only handed a batch to its first stage: its real ms
            ms = round(answer["ms"], 3)
        else:  # nothing computed: the lane's median step, as on our lanes
            ms = round(statistics.median(self.measured) if self.measured else self.reference_ms, 3)
        self.clock = round(start + ms, 3)
        record = self.record(answer, start, ms)
        self.records.append(record)
        if self.done and self.owned:  # every request finished: the bridge is clean, kept warm for the next run
            self.abandon.detach()
            release(self.bridge, self.args, self.model_folder)
        return record

    def record(self, answer: dict, start: float, ms: float) -> StepRecord:
        step = len(self.records) + 1
        cells = [SlotRecord(SlotState.IDLE)] * len(self.slots)
        preempted = [self.by_key[k] for k in answer["preempted"]]
        for r in preempted:  # drawn where it ran, then its slot is free
            if r.slot is not None:
                cells[r.slot], self.slots[r.slot], r.slot = SlotRecord(SlotState.PREEMPTED, r.id), None, None
            r.prefill_total, r.num_preemptions = None, r.num_preemptions + 1
        admitted, finished, states = [], [], set()
        for key, (computed, n, num_tokens, _prompt_len) in answer["scheduled"].items():
            r, cached = self.by_key[key], 0
            if r.slot is None:
                r.slot = self.slots.index(None)
                self.slots[r.slot] = r
                admitted.append(r.id)
            if r.prefill_total is None:  # a (re)start: what it computed before this step came from the prefix cache
                r.prefill_total, cached = num_tokens, computed
            out = answer["outputs"].get(key, {"token_ids": [], "finish": None})
            new = out["token_ids"]
            r.output_ids.extend(new)
            token_id = new[-1] if new else None
            stop = FINISH.get(out["finish"]) if out["finish"] else None
            text = self.text_delta(r, final=out["finish"] is not None) if new else None
            if computed < r.prefill_total:
                state = SlotState.PREFILL
                prefill = (min(computed + n, r.prefill_total), r.prefill_total)
            else:
                state, prefill = SlotState.DECODE, None
            states.add(state)
            if stop is not None:
                r.stop = stop
                finished.append(r.id)
            cells[r.slot] = SlotRecord(state, r.id, token_id=token_id, token=text, stop=stop, prefill=prefill,
                                       special=token_id is not None and token_id in self.special_ids, cached=cached)
        for r in self.requests:  # a finished request's slot is free for the next step
            if r.stop is not None and r.slot is not None:
                self.slots[r.slot], r.slot = None, None
        self.finished += len(finished)
        used_blocks = round(answer["kv_usage"] * self.kv_blocks)
        forward = Forward.NONE if not states else Forward.FUSED if len(states) > 1 else \
            Forward.PREFILL if SlotState.PREFILL in states else Forward.DECODE
        return StepRecord(
            lane=self.name, step=step, slots=tuple(cells),
            waiting=tuple(self.by_key[k].id for k in answer["waiting"]),
            admitted=tuple(admitted), finished=tuple(finished), returned=tuple(finished),
            preempted=tuple(r.id for r in preempted),
            kv_used=used_blocks * self.block_size, kv_capacity=self.kv_blocks * self.block_size,
            kv_blocks_used=used_blocks, kv_blocks_total=self.kv_blocks,
            start_ms=start, ms=ms, forward_ms=ms if states else 0.0, forward=forward,
            placement=self.placement if step == 1 else None)

    @property
    def special_ids(self) -> frozenset[int]:
        return self.lm.special_ids if self.lm is not None else frozenset()

    def text_delta(self, r: VllmRequest, final: bool = False) -> str:
        """The text its newest tokens add (our tokenizer, as our lanes write it, decoding only those tokens; empty
        mid UTF-8 character until `final`)."""
        delta, r.text_prefix, r.text_read = next_text(
            lambda ids: self.lm.tokenizer.decode(ids, clean_up_tokenization_spaces=False), r.output_ids,
            r.text_prefix, r.text_read, final)
        r.text += delta
        return delta


def transport(carrier: str | None) -> str:
    """What carried a split vLLM engine's collectives, from the class its workers reported (vllm_bridge.where)."""
    if carrier and "SHM" in carrier:
        return "shared memory (vLLM-CPU's SHM communicator: all-reduce and send/recv through /dev/shm)"
    return f"gloo over loopback TCP (torch.distributed, vLLM's {carrier or 'CpuCommunicator'})"


def split_placement(workers: list[dict], driver_pid: int, place) -> dict | None:
    """A vLLM lane's placement when its engine is split over worker processes (None: one process): the bridge (the
    driver: vLLM's scheduler, which waits on the workers) and each worker as a tensor-parallel rank or pipeline stage."""
    if len(workers) < 2:
        return None
    tp = any(w["tp"] for w in workers)
    roles = [f"vllm tp rank {w['tp_rank']}" if tp else f"vllm pp stage {w['pp_rank']}" for w in workers]
    processes = [{"role": "driver", "pid": driver_pid, "threads": 1}] + \
        [{"role": role, "pid": w["pid"], "threads": w["threads"], "cores": w["cores"]} for role, w in zip(roles, workers)]
    return place(processes, transport(next((w["tp"] or w["pp"] for w in workers if w["tp"] or w["pp"]), None)))
