"""The fleet's router: which replica of a data-parallel lane takes an arriving request, by the real routers' rules.

Each policy is the published one (sources in docs/fleets.md): vllm-router's round_robin, power_of_two,
consistent_hash and cache_aware (its approximate prefix tree of request text per worker: the best match wins above
`cache_threshold`, unless the loads are imbalanced, max - min > `balance_abs_threshold` and max >
`balance_rel_threshold` x min, then the least loaded wins), least loaded (join the shortest queue), Dynamo's KV router
(cost = `overlap_score_weight` x prefill blocks + decode blocks, lowest wins) and vLLM's own data-parallel balancer
(score = max(clients x in flight, waiting + running), plus a penalty for waiting under KV pressure, lowest wins).
A router decides from a `ReplicaView` per replica, what it could know at the arrival, and says why (`Choice.branch`).
It knows no lanes, steps or tensors: engine/fleet.py builds the views and sends the request.
"""
import random
from dataclasses import dataclass

from engine.config import FleetConfig
from engine.sched.hashring import HashRing, hash_key
from engine.spec import RequestSpec


@dataclass(frozen=True)
class ReplicaView:
    """What a router may know of one replica when a request arrives."""
    inflight: int       # requests the router sent it that have not come back yet (vllm-router's worker load)
    waiting: int        # its engine's queue: sent, not running (vLLM's scheduler stats)
    running: int        # requests holding one of its slots
    kv_usage: float     # the share of its KV blocks in use
    active_blocks: int  # KV blocks its requests hold (Dynamo's decode blocks)
    matched: int        # prompt tokens of this request its prefix cache holds, in full blocks (Dynamo's overlap)


@dataclass(frozen=True)
class Choice:
    replica: int                          # where the request goes
    branch: str                           # why (the policy's branch, as its counters name it)
    scores: tuple[float | None, ...] = ()  # per replica, the policy's own score (docs/fleets.md says which)


def lowest(values: list[float], start: int = 0) -> tuple[int, bool]:
    """The index of the lowest value, scanning from `start` round the list (the first wins a tie), and whether
    another value tied it."""
    n = len(values)
    order = [(start + i) % n for i in range(n)]
    best = min(order, key=lambda i: values[i])  # min keeps the first of equal keys in scan order
    return best, sum(1 for v in values if v == values[best]) > 1


class Router:
    def __init__(self, fleet: FleetConfig, block_size: int, workers: list[str]):
        self.fleet = fleet
        self.block_size = block_size
        self.workers = workers                     # the replicas' names (consistent_hash's ring is built from them)
        self.count = 0                             # round_robin's counter
        self.rng = random.Random(fleet.router_seed)  # power_of_two's pairs
        self.ring = HashRing(workers) if fleet.router == "consistent_hash" else None
        self.texts: list[list[str]] = [[] for _ in workers]  # cache_aware: the request texts sent to each worker
        self.dp_start = 0                          # vllm_dp: where its scan starts (rotated after every request)

    def route(self, spec: RequestSpec, replicas: list[ReplicaView]) -> Choice:
        return getattr(self, self.fleet.router)(spec, replicas)

    # -- the policies ----------------------------------------------------------------------------------
    def round_robin(self, spec: RequestSpec, replicas: list[ReplicaView]) -> Choice:
        self.count += 1
        return Choice((self.count - 1) % len(replicas), "round_robin")

    def least_loaded(self, spec: RequestSpec, replicas: list[ReplicaView]) -> Choice:
        loads = [r.inflight for r in replicas]
        best, tie = lowest(loads)
        return Choice(best, "tie" if tie else "least_loaded", tuple(loads))

    def power_of_two(self, spec: RequestSpec, replicas: list[ReplicaView]) -> Choice:
        a, b = self.rng.sample(range(len(replicas)), 2)
        la, lb = replicas[a].inflight, replicas[b].inflight
        scores = tuple(float(r.inflight) if i in (a, b) else None for i, r in enumerate(replicas))
        return Choice(a if la <= lb else b, "tie" if la == lb else "power_of_two", scores)

    def consistent_hash(self, spec: RequestSpec, replicas: list[ReplicaView]) -> Choice:
        return Choice(self.ring.worker(hash_key(spec.session, spec.prompt)), "hash")

    def cache_aware(self, spec: RequestSpec, replicas: list[ReplicaView]) -> Choice:
        f, loads, text = self.fleet, [r.inflight for r in replicas], spec.prompt
        matched = [self.match_chars(i, text) for i in range(len(replicas))]
        rates = tuple(m / len(text) if text else 0.0 for m in matched)
        if max(loads) - min(loads) > f.balance_abs_threshold and max(loads) > min(loads) * f.balance_rel_threshold:
            choice = Choice(lowest(loads)[0], "load_balance", rates)
        elif max(rates) > f.cache_threshold:  # of the workers holding the best match, the least loaded (the first on a tie)
            best = min((i for i in range(len(replicas)) if matched[i] == max(matched)), key=lambda i: (loads[i], i))
            choice = Choice(best, "cache_hit", rates)
        else:
            choice = Choice(lowest(loads)[0], "low_match", rates)
        self.texts[choice.replica].append(text)  # the tree learns the text whichever branch chose
        return choice

    def match_chars(self, worker: int, text: str) -> int:
        """The longest prefix of `text` that `worker`'s texts begin with: what its radix tree matches."""
        best = 0
        for seen in self.texts[worker]:
            n, limit = best, min(len(seen), len(text))
            if seen[:n] != text[:n]:
                continue
            while n < limit and seen[n] == text[n]:
                n += 1
            best = n
        return best

    def kv_aware(self, spec: RequestSpec, replicas: list[ReplicaView]) -> Choice:
        size, tokens = self.block_size, len(spec.prompt_ids)
        blocks = -(-tokens // size)
        costs = [self.fleet.overlap_score_weight * (tokens - r.matched) / size + r.active_blocks + blocks
                 for r in replicas]
        best, tie = lowest(costs)
        return Choice(best, "tie" if tie else "lowest_cost", tuple(round(c, 4) for c in costs))

    def vllm_dp(self, spec: RequestSpec, replicas: list[ReplicaView]) -> Choice:
        scores = [max(r.inflight, r.waiting + r.running) + (r.waiting * 6.0 * max(0.0, r.kv_usage - 0.5))
                  for r in replicas]  # one API server: client_count 1
        best, tie = lowest(scores, self.dp_start)
        self.dp_start = (self.dp_start + 1) % len(replicas)
        return Choice(best, "tie" if tie else "lowest_score", tuple(round(s, 4) for s in scores))
