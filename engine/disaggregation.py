"""A P/D lane: prefill engines and decode engines on the run's shared clock, each request's KV blocks copied between.

Each engine is a whole continuous `Lane` (its own scheduler, slots, paged KV pool, block tables, runner and clock) on
the same model. An arrival goes to the least loaded prefill engine (requests sent and not yet handed off; the lowest
index on a tie), which computes its prompt (whole or chunked, as the lane's options say) and its first token; then
the request's blocks are really copied (engine/kv/transfer.py) into the blocks of a decode engine's pool that its
block table there names (the decode engine with the fewest requests, the lowest index on a tie), the prefill engine
frees them, and the decode engine runs that request's decode steps, decode rows only. Each lane step writes one
`StepRecord` whose `replicas` holds every engine's own record (prefill engines first, `roles` says which), whose
`routes` holds the arrivals' prefill engines and whose `transfers` holds the hand-offs it made: the engines' records
are lane records like any other, so the step record stays the single source.

When things happen. A hand-off starts when the prefill step that wrote the first token ends and lasts the copy's ms;
the request reaches the decode engine's queue when it is done. Arrivals in ms: an arrival is routed once no prefill
engine with work can still start a step before it; a prefill engine steps when its next step starts before the next
arrival; a decode engine steps when its next step starts no later than any hand-off could still reach it (the next
start of every prefill engine with work, and the next arrival). Arrivals in steps: every engine takes its step k
together, all starting when the slowest of their steps k - 1 that computed something ended and its hand-offs'
copies were done (one shared step clock, so a long prefill step holds the decode engines' next step: P/D's gain in
inter-token latency shows with arrivals in ms); step k routes the arrivals of step k - 1 and queues at the decode
engines the hand-offs of step k - 1. It does not know how an
engine schedules or computes, nor what the copy goes through.
"""
import os

from engine.kv.transfer import KVChannel
from engine.lane import Lane
from engine.report.placement import placement
from engine.worker.model import compute_threads
from engine.request import Request, RequestStatus
from engine.spec import RequestSpec
from engine.step import Forward, Route, StepRecord, Transfer

INF = float("inf")


class EngineFailed(RuntimeError):
    """An engine's step raised: the message names the engine, the lane step and the cause; the run ends with it."""


class PDLane:
    def __init__(self, name: str, prefill: list[Lane], decode: list[Lane], channel: KVChannel,
                 specs: list[RequestSpec], timed: bool):
        self.name = name
        self.prefill, self.decode = prefill, decode
        self.channel = channel
        self.timed = timed
        self.order = {s.id: i for i, s in enumerate(specs)}
        self.pending = sorted(specs, key=lambda s: (self.arrival(s), self.order[s.id]))  # not yet routed
        self.records: list[StepRecord] = []
        self.sent: dict[str, int] = {}           # request -> its prefill engine
        self.wire: list[tuple[float, int, Request]] = []  # step clock: (copy done ms, decode engine, request) not queued
        for lane in self.engines:
            lane.open = True                     # an engine with nothing to do still waits for what may come

    @property
    def engines(self) -> list[Lane]:
        return self.prefill + self.decode

    @property
    def policy(self) -> str:
        return self.prefill[0].policy

    @property
    def clock(self) -> float:
        return max(lane.clock for lane in self.engines)

    @property
    def done(self) -> bool:
        return not self.pending and not self.wire and all(p.scheduler.is_finished() and not p.scheduler.handoffs
                                                          for p in self.prefill) \
            and all(d.scheduler.is_finished() for d in self.decode)

    @property
    def requests(self) -> list[Request]:
        """Each request where it ended: on its decode engine, or on its prefill engine if it stopped there."""
        out = {r.id: r for lane in self.prefill for r in lane.requests}
        out.update({r.id: r for lane in self.decode for r in lane.requests})
        return sorted(out.values(), key=lambda r: self.order[r.id])

    def arrival(self, spec: RequestSpec) -> float:
        return spec.arrival_ms if self.timed else spec.arrival

    def step(self) -> StepRecord | None:
        """Route what has arrived, step the engines it is their turn to step, hand off; None once all returned."""
        if self.done:
            for lane in self.engines:
                lane.open = False
            self.channel.close()
            return None
        k = len(self.records) + 1
        if not self.timed:  # one shared step clock: every engine's step k starts when the slowest step k - 1 ended
            now = self.shared_clock()
            for lane in self.engines:
                lane.clock = now
            self.queue_arrived(now, k)
        routes = []
        while self.pending and self.routable(self.arrival(self.pending[0]), k):
            routes.append(self.route(self.pending.pop(0)))
        upto = self.arrival(self.pending[0]) if self.pending else INF
        stepped, transfers = [], []
        for i, lane in enumerate(self.prefill):
            record = self.step_engine(f"prefill engine {i}", lane, k) \
                if not self.timed or lane.next_start() < upto else None
            stepped.append(record)
            if record is not None:
                transfers += self.hand_off(i, lane, record.start_ms + record.ms, k)
        horizon = min([upto] + [p.next_start() for p in self.prefill])  # no hand-off can reach a decoder before
        for i, lane in enumerate(self.decode):
            start = lane.next_start()
            stepped.append(self.step_engine(f"decode engine {i}", lane, k)
                           if not self.timed or start <= horizon and start < INF else None)
        made = [r for r in stepped if r is not None]
        start = min((r.start_ms for r in made), default=self.clock)
        record = StepRecord(lane=self.name, step=k, slots=(), start_ms=start,
                            ms=round(max((r.start_ms + r.ms for r in made), default=start) - start, 3),
                            forward=Forward.NONE, simulated=all(lane.runner.simulated for lane in self.engines),
                            replicas=tuple(stepped), routes=tuple(routes),
                            roles=("prefill",) * len(self.prefill) + ("decode",) * len(self.decode),
                            transfers=tuple(transfers), placement=None if self.records else self.placement())
        self.records.append(record)
        return record

    def placement(self) -> dict | None:
        """Where the lane ran (engine/report/placement.py): every engine in this one process, stepping in turn, so
        one engine's threads compute at a time; the copy goes through a shared-memory segment. None on the
        simulator, which runs nowhere."""
        lm = getattr(self.engines[0].runner, "lm", None)
        if self.channel.simulated or lm is None:
            return None
        threads, pid = compute_threads(), os.getpid()
        roles = ["prefill"] * len(self.prefill) + ["decode"] * len(self.decode)
        device = "cpu" if lm.device.type == "cpu" else f"{lm.device.type}:{lm.device.index or 0}"
        return placement([{"role": role, "pid": pid, "threads": threads} for role in roles],
                         "shared memory (multiprocessing.shared_memory), both sides in this one process", device)

    def shared_clock(self) -> float:
        """Step clock: when the lane's next step starts: once its slowest engine step that computed something ended
        (an idle engine's step, charged its median step, holds no one up) and the copies of its hand-offs were done,
        so every hand-off reaches its decode engine's queue at the next step."""
        if not self.records:
            return self.clock
        last = self.records[-1]
        ends = [r.start_ms + r.ms for r in last.replicas if r is not None and r.forward is not Forward.NONE]
        ends += [t.start_ms + t.ms for t in last.transfers]
        return round(max(ends), 3) if ends else self.clock

    def step_engine(self, which: str, lane: Lane, k: int) -> StepRecord | None:
        try:
            return lane.step()
        except Exception as e:
            raise EngineFailed(f"{which} ({lane.name}) of P/D lane {self.name!r} failed in step {k}: "
                               f"{type(e).__name__}: {e}") from e

    def routable(self, at: float, k: int) -> bool:
        """Whether an arrival at `at` can be routed now: in steps, at step `at` + 1; in ms, once no prefill engine
        with work will start a step before it."""
        if not self.timed:
            return at <= k - 1
        return all(lane.next_start() >= at for lane in self.prefill)


    def route(self, spec: RequestSpec) -> Route:
        """Send an arrival to the prefill engine with the fewest requests sent and not yet handed off."""
        loads = [sum(1 for r in lane.requests if r.status is not RequestStatus.RETURNED) for lane in self.prefill]
        i = loads.index(min(loads))
        self.sent[spec.id] = i
        request = Request(spec, order=self.order[spec.id])
        self.prefill[i].scheduler.requests.append(request)
        self.prefill[i].scheduler.send(request)
        return Route(spec.id, i, "tie" if loads.count(min(loads)) > 1 else "least_loaded", self.arrival(spec),
                     tuple(loads), (0,) * len(loads), len(spec.prompt_ids))

    def hand_off(self, i: int, lane: Lane, end_ms: float, k: int) -> list[Transfer]:
        """Copy the KV blocks of every request prefill engine `i` handed off in its step (which ended at `end_ms`)
        into a decode engine's pool, and queue it there once the copy is done."""
        out = []
        for p in list(lane.scheduler.handoffs):
            j = self.pick_decoder()
            d = self.decode[j]
            request = carried(p)
            src = list(lane.scheduler.blocks.tables[p.id])
            d.scheduler.blocks.grow(request, request.num_cached)
            dst = list(d.scheduler.blocks.tables[p.id])
            copied = self.channel.move(lane.runner, src, d.runner, dst)
            assert copied.bytes == len(src) * self.channel.block_bytes
            lane.scheduler.sent(p)
            ready = round(end_ms + copied.ms, 3)
            d.scheduler.requests.append(request)
            if self.timed:
                self.queue(d, request, ready)
            else:
                self.wire.append((ready, j, request))
            out.append(Transfer(p.id, i, j, copied.blocks, copied.bytes, copied.ms, end_ms, tuple(src), tuple(dst),
                                copied.through))
        return out

    def queue_arrived(self, now: float, k: int) -> None:
        """Step clock: queue at their decode engines the hand-offs whose copy is done by `now` (step k's start)."""
        for item in [w for w in self.wire if w[0] <= now]:
            self.wire.remove(item)
            self.queue(self.decode[item[1]], item[2], k - 1)

    def queue(self, lane: Lane, request: Request, at: float) -> None:
        """`request` reaches `lane`'s queue at `at` (lane-clock ms, or a 0-based step)."""
        request.handoff_at = at
        lane.scheduler.send(request)

    def pick_decoder(self) -> int:
        """The decode engine holding the fewest requests (running, queued or on their way), the lowest on a tie."""
        loads = [sum(1 for r in lane.requests if r.status is not RequestStatus.RETURNED) for lane in self.decode]
        return loads.index(min(loads))


def carried(p: Request) -> Request:
    """The decode engine's `Request` for prefill engine's `p`: its prompt computed, its first token written, its
    text, sampling state and logprobs so far; its KV blocks are copied separately."""
    r = Request(p.spec, order=p.order)
    r.output_ids, r.prefill_ids = list(p.output_ids), list(p.prefill_ids)
    r.num_prefilled, r.num_cached = p.num_prefilled, p.num_cached
    r.text, r.text_prefix, r.text_read = p.text, p.text_prefix, p.text_read
    r.rng, r.matcher = p.rng, p.matcher
    r.token_logprobs, r.prompt_logprobs = list(p.token_logprobs), list(p.prompt_logprobs)
    return r
