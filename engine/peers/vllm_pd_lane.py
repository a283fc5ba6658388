"""A vLLM P/D lane: a real vLLM prefill engine and decode engine (engine/peers/vllm_pair.py) joined by vLLM's
ExampleConnector, stepped in lockstep and recorded like our P/D lanes (engine/disaggregation.py).

    {"name": "vLLM P/D", "engine": "vllm", "disaggregation": {"prefill": 1, "decode": 1}}

Each engine is a VllmLane on its own bridge process: the prefill engine gets every request with max_tokens 1 (vLLM's
example: the prefill instance writes the first token), the decode engine gets prompt + first token and the rest of
the tokens; its connector finds the prompt's full blocks that the prefill engine's connector saved, loads them into
its own pool, and its scheduler computes only the tail (the partial block and the first token): that first decode
step is drawn as a prefill cell whose `cached` tokens are the loaded ones.

Each lane step writes one StepRecord shaped like a P/D lane's: `replicas` (prefill engine, decode engine), `roles`,
`routes` (every arrival to prefill engine 0) and `transfers`. A transfer is written in the lane step whose decode
step loaded it: its bytes are what the connector wrote and read (the K and V of the prompt's full blocks, every
layer: blocks x 32 tokens x 46,080 bytes for SmolLM2 in float32), its ms the connector's save (inside the prefill
forward, layer by layer) plus its load (at the start of the decode forward), both measured in the engines. Those ms
are taken out of the engines' steps and drawn between them: the prefill step ends before its save, the decode step
starts after its load, so the five TTFT parts do not overlap. Arrivals in steps: every engine takes step k together,
when the slowest step k - 1 that computed something ended and its saves were done; a hand-off of step k is loaded in
step k + 1. Arrivals in ms: each engine on its own clock, one engine a lane step (the one whose next step starts
first), a request given to the decode engine once its save is done.
"""
import os
import weakref
from dataclasses import replace

from engine.config import LaneSpec
from engine.spec import RequestSpec
from engine.step import Forward, Route, StepRecord, StopReason, Transfer
from engine.peers.vllm_lane import VllmLane, VllmRequest
from engine.peers.vllm_options import engine_args
from engine.peers.vllm_pair import acquire_pair, release_pair

INF = float("inf")
TRANSPORT = ("vLLM ExampleConnector: one safetensors file per layer per request on /dev/shm (tmpfs: memory), "
             "written by the prefill engine, read by the decode engine")
BRIDGE_BIND = "0-1"   # engine/peers/vllm_bridge.py's default binding of each engine's OpenMP threads
THROUGH = "vllm_example_connector"   # safetensors files under /dev/shm, one per layer per request (tmpfs: memory)


class VllmPDLane:
    """A Lane-like lane (name, records, clock, done, requests, step()) over a vLLM prefill engine and decode engine."""

    def __init__(self, spec: LaneSpec, requests: list[RequestSpec], timed: bool, lm, model_folder: str,
                 place=None):
        self.name, self.spec, self.lm = spec.name, spec, lm
        self.place = place   # placement(processes, transport) (engine/report/placement.py; peers sit below report)
        self.specs = list(requests)
        self.args, self.model_folder = engine_args(spec), model_folder
        self.pair = acquire_pair(model_folder, self.args)   # a warm pair, or two vLLM starts (~45 s each, at once)
        self.abandon = weakref.finalize(self, self.pair.close)   # a run dropped mid-way (stopped, failed) ends both
        self.prefill = VllmLane(replace(spec, name=f"{spec.name}/prefill0"),
                                [replace(s, max_new_tokens=1) for s in requests], timed, lm, model_folder,
                                bridge=self.pair.prefill)
        self.decode = VllmLane(replace(spec, name=f"{spec.name}/decode0"), [], False, lm, model_folder,
                               bridge=self.pair.decode)
        self.kv_blocks, self.block_size = self.decode.kv_blocks, self.decode.block_size   # the pair's blocks (32 unless set)
        self.records: list[StepRecord] = []
        self.clock = 0.0
        self.wire: dict[str, tuple[float, dict, float]] = {}   # handed off, not loaded: id -> (prefill end, saved, save ms)
        self.outbox: list[tuple[float, VllmRequest]] = []      # arrivals in ms: saved, not yet given to the decode engine
        self.timed = timed

    @property
    def policy(self) -> str:
        return self.spec.policy

    @property
    def done(self) -> bool:
        p, d = self.prefill, self.decode
        return all(r.stop is not None for r in p.requests) and len(d.requests) == len(self.handed) and d.done

    @property
    def handed(self) -> list[VllmRequest]:
        return [r for r in self.prefill.requests if r.stop is StopReason.LENGTH and r.spec.max_new_tokens
                < self.spec_of[r.id].max_new_tokens]

    @property
    def spec_of(self) -> dict[str, RequestSpec]:
        return {s.id: s for s in self.specs}

    @property
    def requests(self) -> list[VllmRequest]:
        """Each request as the client sees it: the prefill engine's first token, then the decode engine's tokens."""
        decoded = {r.id: r for r in self.decode.requests}
        out = []
        for spec, p in zip(self.specs, self.prefill.requests):
            d = decoded.get(p.id)
            r = VllmRequest(spec, p.key, output_ids=p.output_ids + (d.output_ids if d else []),
                            text=p.text + (d.text if d else ""), stop=d.stop if d else p.stop)
            out.append(r)
        return out

    def step(self) -> StepRecord | None:
        if self.done:
            return None
        record = self.step_timed() if self.timed else self.step_shared()
        if self.done and self.abandon.detach() is not None:   # every request finished: the pair is kept warm
            release_pair(self.pair, self.model_folder, self.args)
        return record

    def step_timed(self) -> StepRecord:
        """Arrivals in ms: each engine on its own clock; the lane steps the engine whose next step starts first (the
        prefill engine on a tie), so the decode engine never steps past a time a hand-off could still reach it."""
        k = len(self.records) + 1
        p_next, d_next = self.next_prefill(), self.next_decode()
        added = {r.id for r in self.prefill.requests if r.added}
        stepped, transfers = [None, None], []
        if p_next <= d_next:
            stepped[0] = self.prefill.step()
            self.hand_off(stepped[0])
        else:
            for ready, d in [o for o in self.outbox if o[0] <= d_next]:   # copies done by its step's start
                self.outbox.remove((ready, d))
                self.deliver(d)
            self.decode.clock = d_next
            stepped[1] = self.decode.step()
            transfers = self.loaded(k)
        return self.write(k, stepped, transfers, added, p_next if p_next <= d_next else d_next)

    def next_prefill(self) -> float:
        """When the prefill engine's next step starts: now with work, at its next arrival without, else never."""
        p = self.prefill
        if any(r.added and r.stop is None for r in p.requests):
            return p.clock
        waiting = [r.spec.arrival_ms for r in p.requests if not r.added]
        return max(p.clock, min(waiting)) if waiting else INF

    def next_decode(self) -> float:
        """When the decode engine's next step starts: now with work, when the next copy is done without, else never."""
        d = self.decode
        if any(r.stop is None for r in d.requests):
            return d.clock
        return max(d.clock, min(ready for ready, _ in self.outbox)) if self.outbox else INF

    def step_shared(self) -> StepRecord:
        k = len(self.records) + 1
        now = self.shared_clock()
        added = {r.id for r in self.prefill.requests if r.added}
        stepped = [None, None]
        if not all(r.stop is not None for r in self.prefill.requests):
            self.prefill.clock = now
            stepped[0] = self.prefill.step()
        if not self.decode.done:
            self.decode.clock = now
            stepped[1] = self.decode.step()
        transfers = self.loaded(k)
        if stepped[0] is not None:
            self.hand_off(stepped[0])
        return self.write(k, stepped, transfers, added, now)

    def write(self, k: int, stepped: list, transfers: list[Transfer], added: set[str], now: float) -> StepRecord:
        """The lane step's record: its engines' records, the arrivals routed in it and the transfers it loaded."""
        routes = [Route(r.id, 0, "only", r.spec.arrival_ms if self.timed else r.spec.arrival, (0,), (0,),
                        len(r.spec.prompt_ids)) for r in self.prefill.requests if r.added and r.id not in added]
        made = [r for r in stepped if r is not None]
        start = min((r.start_ms for r in made), default=now)
        end = max([r.start_ms + r.ms for r in made] + [t.start_ms + t.ms for t in transfers], default=start)
        record = StepRecord(lane=self.name, step=k, slots=(), start_ms=start, ms=round(end - start, 3),
                            forward=Forward.NONE, replicas=tuple(stepped), routes=tuple(routes),
                            roles=("prefill", "decode"), transfers=tuple(transfers),
                            placement=None if self.records else self.placement())
        self.records.append(record)
        self.clock = max(self.clock, end)
        return record

    def placement(self) -> dict | None:
        """Where the pair ran (`place`: engine/report/placement.py's, handed in by the engine): two bridge processes,
        each a vLLM engine whose OpenMP threads are bound to the same cores (VLLM_CPU_OMP_THREADS_BIND,
        engine/peers/vllm_bridge.py), joined by ExampleConnector's files on /dev/shm."""
        if self.place is None:
            return None
        binding = os.environ.get("VLLM_CPU_OMP_THREADS_BIND", BRIDGE_BIND)
        threads = sum(int(b or a) - int(a) + 1 for a, _, b in (part.partition("-") for part in binding.split(",")))
        return self.place([{"role": role, "pid": bridge.proc.pid, "threads": threads}
                          for role, bridge in (("prefill", self.pair.prefill), ("decode", self.pair.decode))],
                         TRANSPORT)

    def shared_clock(self) -> float:
        """When step k starts: once the slowest engine step k - 1 that computed something ended and the saves of its
        hand-offs were done."""
        if not self.records:
            return self.clock
        ends = [r.start_ms + r.ms for r in self.records[-1].replicas if r is not None and r.forward is not Forward.NONE]
        ends += [end + save_ms for end, _, save_ms in self.wire.values()]
        return round(max(ends), 3) if ends else self.clock

    def hand_off(self, record: StepRecord) -> None:
        """Give the decode engine every request whose first token the prefill step wrote and that goes on."""
        io = (self.prefill.kv_io or {}).get("requests", {})
        save_ms = (self.prefill.kv_io or {}).get("save_ms", 0.0)
        total = sum(v.get("saved", {}).get("bytes", 0) for v in io.values()) or 1
        for rid in record.finished:
            p = next(r for r in self.prefill.requests if r.id == rid)
            spec = self.spec_of[rid]
            if p.stop is not StopReason.LENGTH or spec.max_new_tokens == 1:
                continue   # stopped on its first token (EOS): never leaves the prefill engine
            saved = io.get(p.key, {}).get("saved", {})
            self.wire[rid] = (record.start_ms + record.ms, saved, save_ms * saved.get("bytes", 0) / total)
            d_spec = replace(spec, prompt_ids=tuple(spec.prompt_ids) + tuple(p.output_ids),
                             max_new_tokens=spec.max_new_tokens - 1, arrival=0)
            d = VllmRequest(d_spec, p.key, added=True)
            if self.timed:   # it reaches the decode engine once its save is done (its load is in that engine's step)
                self.outbox.append((round(self.wire[rid][0] + self.wire[rid][2], 3), d))
            else:
                self.deliver(d)

    def deliver(self, d: VllmRequest) -> None:
        """Hand the decode engine a request: prompt + first token, the rest of its tokens to write."""
        s = d.spec
        self.decode.requests.append(d)
        self.decode.by_key[d.key] = d
        self.pair.decode.call({"op": "add", "id": d.key, "prompt_ids": list(s.prompt_ids), "max_new_tokens":
                               s.max_new_tokens, "ignore_eos": s.ignore_eos, "temperature": s.temperature,
                               "top_p": s.top_p, "seed": s.seed}, "handing a request to the decode engine")

    def loaded(self, k: int) -> list[Transfer]:
        """The transfers the decode engine's step just loaded: what was saved and loaded, and the ms of both."""
        io = (self.decode.kv_io or {}).get("requests", {})
        load_ms = (self.decode.kv_io or {}).get("load_ms", 0.0)
        total = sum(v.get("loaded", {}).get("bytes", 0) for v in io.values()) or 1
        out = []
        for d in self.decode.requests:
            if d.id not in self.wire or d.slot is None and d.stop is None:
                continue   # not yet scheduled by the decode engine: its blocks are still on the wire
            end, saved, save_ms = self.wire.pop(d.id)
            got = io.get(d.key, {}).get("loaded", {})
            # all that was saved is loaded, or nothing: the decode engine's own prefix cache held every full block
            assert got.get("bytes", 0) in (0, saved.get("bytes", 0)), (d.id, saved, got)
            blocks = got.get("tokens", 0) // self.block_size
            ms = save_ms + load_ms * got.get("bytes", 0) / total
            out.append(Transfer(d.id, 0, 0, blocks, got.get("bytes", 0), ms, end, (), (), THROUGH))
        return out
