"""A fleet: one data-parallel lane, N replicas behind a router, on the run's shared clock.

Each replica is a whole continuous `Lane` (its own scheduler, slots, KV pool, prefix cache, runner and clock) on the
same model; the fleet holds the workload's requests until they arrive and the router (engine/sched/router.py) sends
each to one replica, deciding from what it could know at that moment. Each fleet step writes one `StepRecord` whose
`replicas` holds every replica's own record of the step and whose `routes` holds the router's decisions since the
last one: the replica records are lane records like any other (memory map, waits, metrics), so the step record stays
the single source. Arrivals in steps: fleet step k routes the arrivals of step k - 1, then every replica takes its
step k. Arrivals in ms: an arrival is routed once no replica with work can still start a step before it (a replica
idle till then waits for it, as a lane does), then every replica whose next step starts before the next arrival
steps. The router's loads are its own counts of what it sent and has not had back by the arrival, as vllm-router
counts; the engine facts (waiting, running, KV blocks, cached prefixes) are each replica's after its latest step.
It does not know how a replica schedules or computes, nor how a policy routes.
"""
from engine.lane import Lane
from engine.request import Request, RequestStatus
from engine.sched.router import ReplicaView, Router
from engine.spec import RequestSpec
from engine.step import Forward, Route, StepRecord

INF = float("inf")


class ReplicaFailed(RuntimeError):
    """A replica's step raised: the message names the replica, the fleet step and the cause; the run ends with it."""


class FleetLane:
    def __init__(self, name: str, replicas: list[Lane], router: Router, specs: list[RequestSpec], timed: bool):
        self.name = name
        self.replicas = replicas
        self.router = router
        self.timed = timed
        self.order = {s.id: i for i, s in enumerate(specs)}
        self.pending = sorted(specs, key=lambda s: (self.arrival(s), self.order[s.id]))  # not yet routed
        self.records: list[StepRecord] = []
        self.sent: dict[str, int] = {}           # request -> its replica
        self.back: dict[str, float] = {}         # request -> when its response came back (ms, or its 1-based step)
        self.groups: dict[str, int] = {}         # a request's n samples: its group -> the replica its leader went to
        for lane in replicas:
            lane.open = True                     # a replica with nothing to do still waits for what may come

    @property
    def policy(self) -> str:
        return self.replicas[0].policy

    @property
    def clock(self) -> float:
        return max(lane.clock for lane in self.replicas)

    @property
    def done(self) -> bool:
        return not self.pending and all(lane.scheduler.is_finished() for lane in self.replicas)

    @property
    def requests(self) -> list[Request]:
        return sorted((r for lane in self.replicas for r in lane.requests), key=lambda r: self.order[r.id])

    def arrival(self, spec: RequestSpec) -> float:
        return spec.arrival_ms if self.timed else spec.arrival

    def step(self) -> StepRecord | None:
        """Route what has arrived, step the replicas it is their turn to step; None once every request returned."""
        if self.done:
            for lane in self.replicas:
                lane.open = False
            return None
        k = len(self.records) + 1
        routes = []
        while self.pending and self.routable(self.arrival(self.pending[0]), k):
            routes.append(self.route(self.pending.pop(0)))
        upto = self.arrival(self.pending[0]) if self.pending else INF
        stepped = tuple(self.step_replica(i, lane, k) if not self.timed or lane.next_start() < upto else None
                        for i, lane in enumerate(self.replicas))
        for record in stepped:
            for rid in record.returned if record is not None else ():
                self.back[rid] = record.start_ms + record.ms if self.timed else record.step
        made = [r for r in stepped if r is not None]
        start = min((r.start_ms for r in made), default=self.clock)
        record = StepRecord(lane=self.name, step=k, slots=(), start_ms=start,
                            ms=round(max((r.start_ms + r.ms for r in made), default=start) - start, 3),
                            forward=Forward.NONE, simulated=all(lane.runner.simulated for lane in self.replicas),
                            replicas=stepped, routes=tuple(routes))
        self.records.append(record)
        return record

    def step_replica(self, i: int, lane: Lane, k: int) -> StepRecord | None:
        try:
            return lane.step()
        except Exception as e:
            raise ReplicaFailed(f"replica {i} ({lane.name}) of fleet {self.name!r} failed in fleet step {k}: "
                                f"{type(e).__name__}: {e}") from e

    def routable(self, at: float, k: int) -> bool:
        """Whether an arrival at `at` can be routed now: in steps, at fleet step `at` + 1; in ms, once no replica
        with work will start a step before it."""
        if not self.timed:
            return at <= k - 1
        return all(lane.next_start() >= at for lane in self.replicas)


    def route(self, spec: RequestSpec) -> Route:
        at = self.arrival(spec)
        views = [self.view(i, lane, spec, at) for i, lane in enumerate(self.replicas)]
        if spec.group in self.groups:  # a sample forks its leader's prompt blocks: it goes where its leader went
            replica, branch, scores = self.groups[spec.group], "sibling", ()
        else:
            choice = self.router.route(spec, views)
            replica, branch, scores = choice.replica, choice.branch, choice.scores
        self.sent[spec.id] = replica
        if spec.group is not None:
            self.groups.setdefault(spec.group, replica)
        send(self.replicas[replica].scheduler, spec, self.order[spec.id])
        return Route(spec.id, replica, branch, at, tuple(v.inflight for v in views), tuple(v.matched for v in views),
                     len(spec.prompt_ids), scores)

    def view(self, i: int, lane: Lane, spec: RequestSpec, at: float) -> ReplicaView:
        s, blocks = lane.scheduler, lane.scheduler.blocks
        inflight = sum(1 for rid, r in self.sent.items() if r == i and not self.back.get(rid, INF) <= at)
        running = sum(1 for r in s.slots if r is not None)
        return ReplicaView(inflight, len(s.waiting) + len(s.pending), running,
                           blocks.num_used / blocks.num_blocks if blocks.num_blocks else 0.0, blocks.num_used,
                           s.prefix.cached_tokens(spec.prompt_ids) if s.prefix is not None else 0)


def send(scheduler, spec: RequestSpec, order: int) -> None:
    """Give a replica's scheduler a request the router sent it: it arrives by its own arrival, as a workload's does."""
    request = Request(spec, order=order)
    scheduler.requests.append(request)
    scheduler.send(request)
    assert request.status is RequestStatus.PENDING


def replica_specs(name: str, size: int) -> list[str]:
    """The replicas' lane names (and the worker names consistent_hash's ring is built from)."""
    return [f"{name}/{i}" for i in range(size)]


