"""The paged KV allocator on the step-clock simulator: block invariants after every step of randomised runs (every
policy, budgets, the prefix cache, reserve, swap, siblings), reserve against paged, swap against recompute, siblings
sharing their prompt blocks, and the options checked at the edge. The simulator counts a prompt as 30 + bytes // 4
tokens."""
from collections import Counter

import pytest
from hypothesis import example, given, settings, strategies as st

from engine import Engine, WorkloadError, parse_workload
from engine.kv.block_manager import BlockManager, blocks_for
from engine.kv.prefix_cache import PrefixCache
from engine.config import EngineConfig
from engine.lane import Lane
from engine.sched.policies import ContinuousScheduler
from engine.request import Request, RequestSpec
from engine.worker.sim import SimRunner, sim_prompt_ids
from engine.step import SlotState

SHARED = "Answer as a museum guide would: short, friendly, exact. " * 2  # 112 bytes: 28 tokens


def prompt_of(tokens: int, head: str = "") -> str:
    """A prompt the simulator counts as exactly `tokens` tokens (starting with `head`, whole 4-byte words)."""
    assert tokens >= 31 + len(head) // 4 and len(head) % 4 == 0
    return head + "x" * 4 * (tokens - 30 - len(head) // 4)


def req(rid, new, prompt=40, arrival=0, priority=0, head=""):
    return {"id": rid, "prompt": prompt_of(prompt, head), "max_new_tokens": new, "ignore_eos": True,
            "arrival": arrival, "priority": priority}


def start(requests, lanes, slots=4, **options):
    engine = Engine(None)
    return engine.start(engine.prepare(parse_workload({"name": "t", "slots": slots, "lanes": lanes,
                                                       "requests": requests, **options})))


class MapReader:
    """The memory map as a page rebuilds it from the records' kv_* deltas alone."""
    def __init__(self):
        self.tables, self.cached, self.swapped = {}, (), {}

    def apply(self, record):
        for rid in record.kv_dropped:
            self.tables.pop(rid, None)
        self.tables.update(record.kv_tables or {})
        if record.kv_cached is not None:
            self.cached = record.kv_cached
        for rid, n in (record.kv_swapped or {}).items():
            self.swapped.pop(rid, None) if n == 0 else self.swapped.__setitem__(rid, n)


def check_blocks(lane, record, reader: MapReader) -> None:
    """Every invariant of the allocator, and the record's map agreeing with it, after one step."""
    b = lane.scheduler.blocks
    held = Counter(block for table in b.tables.values() for block in table)
    assert all(held[i] == b.refs[i] for i in range(b.num_blocks)), "a block held by other than its refcount of tables"
    free = set(b.free_ids)
    assert len(free) == len(b.free_ids), "a block twice on the free list"
    assert not free & set(held), "a block both free and held"
    cached = set(b.prefix.by_id) if b.prefix else set()
    assert not free & cached, "a block both free and cached"
    assert free | set(held) | cached == set(range(b.num_blocks)), "a block lost: neither free, held nor cached"
    if b.prefix:
        assert all(c.refs == b.refs[c.id] for c in b.prefix.by_id.values()), "prefix refs disagree with the tables"
    reader.apply(record)
    assert reader.tables == b.tables, "the record's tables are not the allocator's"
    assert set(reader.cached) == {i for i in cached if b.refs[i] == 0}, "kv_cached is not the unheld cached blocks"
    assert reader.swapped == {rid: len(t) for rid, t in b.host_tables.items()}
    host = [h for t in b.host_tables.values() for h in t]
    assert len(set(host)) == len(host) and not set(host) & set(b.host_free)
    assert len(host) + len(b.host_free) == b.host_blocks
    if b.budgeted:
        assert record.kv_blocks_used <= b.num_blocks
    for r in lane.scheduler.slots:
        if r is not None and r.id in b.tables:
            assert len(b.tables[r.id]) * b.block_size >= r.num_cached, "a table shorter than its request's K/V"
            assert record.kv_tokens[r.id] == r.num_cached


def run_checked(run):
    readers = {name: MapReader() for name in run.lanes}
    while not run.done:
        for name, record in run.tick().items():
            if record is not None:
                check_blocks(run.lanes[name], record, readers[name])
    for lane in run.lanes.values():  # at the end every block is free or cached, every host block free
        b = lane.scheduler.blocks
        assert not b.tables and not b.host_tables and sum(b.refs) == 0
        assert len(b.free_ids) + len(b.cached_free()) == b.num_blocks
    return run


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(31, 100), st.integers(1, 24), st.integers(0, 6), st.integers(0, 2),
                          st.booleans()), min_size=1, max_size=8),
       st.integers(1, 4), st.sampled_from([None, 8, 32]), st.sampled_from([None, 10, 16]),
       st.sampled_from(["fcfs", "priority", "sjf"]))
def test_block_invariants_hold_after_every_step(reqs, slots, chunk, budget_blocks, order):
    requests = [req(f"R{i}", new, prompt=p, arrival=a, priority=pr, head=SHARED if shared else "")
                for i, (p, new, a, pr, shared) in enumerate(reqs) if not shared or p >= 31 + len(SHARED) // 4]
    if not requests:
        return
    budget = None if budget_blocks is None else 16 * budget_blocks  # 160 tokens fit any single request here
    continuous = {"policy": "continuous", "chunk_size": chunk, "scheduling_policy": order}
    plain = ["static", "dynamic", {"name": "paged", **continuous}]
    kinds = [{"name": "cached", **continuous, "prefix_cache": True},
             {"name": "reserve", **continuous, "kv_allocation": "reserve", "prefix_cache": True}]
    if budget is not None:
        kinds.append({"name": "swap", **continuous, "preemption": "swap", "prefix_cache": True})
    for lanes in (plain, kinds):  # at most 4 lanes a run
        run = run_checked(start(requests, lanes, slots=slots, kv_budget=budget, max_wait=2))
        for lane in run.lanes.values():
            assert [len(r.output_ids) for r in lane.requests] == [q["max_new_tokens"] for q in requests]


def test_reserve_admits_fewer_at_once_than_paged_on_the_same_budget():
    requests = [req(f"R{i}", 40, prompt=40) for i in range(8)]
    run = run_checked(start(requests, [{"name": "paged", "policy": "continuous"},
                                       {"name": "reserve", "policy": "continuous", "kv_allocation": "reserve"}],
                            slots=8, kv_budget=16 * 20))
    most = {name: max(sum(c.state is not SlotState.IDLE for c in r.slots) for r in lane.records)
            for name, lane in run.lanes.items()}
    assert most["reserve"] == 4  # 20 blocks / (40 + 39 tokens = 5 blocks each)
    assert most["paged"] > most["reserve"]
    # reserve holds blocks for tokens not yet written: its token usage is below its block usage
    res = run.lanes["reserve"].records
    assert any(r.kv_used < r.kv_blocks_used * 16 - 16 * 4 for r in res)


def test_a_swapped_request_resumes_where_it_stopped_and_every_request_finishes():
    requests = [req(f"R{i}", 60, prompt=40) for i in range(6)]
    run = run_checked(start(requests, [{"name": "swap", "policy": "continuous", "preemption": "swap"},
                                       {"name": "recompute", "policy": "continuous"}], slots=6, kv_budget=16 * 16))
    swap, recompute = run.lanes["swap"], run.lanes["recompute"]
    swapped_cells = [c for r in swap.records for c in r.slots if c.state is SlotState.SWAPPED]
    assert len(swapped_cells) >= 3 and not any(c.state is SlotState.PREEMPTED for r in swap.records for c in r.slots)
    assert sum(1 for r in swap.records for _ in r.kv_swapped or ()) >= 6  # out and back in, several times
    assert all(len(r.output_ids) == 60 for r in swap.requests)
    for r in swap.requests:  # resumed, never recomputed: exactly one prefill of its prompt
        prefill = sum(1 for rec in swap.records for c in rec.slots
                      if c.request == r.id and c.state is SlotState.PREFILL and c.prefill[0] == c.prefill[1])
        assert prefill == 1, r.id
        assert r.num_preemptions == 0 or r.num_cached == 40 + 60 - 1
    assert any(r.copy_ms > 0 for r in swap.records) and all(r.copy_ms == 0 for r in recompute.records)
    recomputed = sum(c.state is SlotState.PREFILL for r in recompute.records for c in r.slots)
    assert recomputed > sum(c.state is SlotState.PREFILL for r in swap.records for c in r.slots)


def sibling_lane(n: int, prompt_tokens: int, new: int = 6, budget: int | None = None, block: int = 16,
                 group: str | None = "R0") -> Lane:
    ids = tuple(sim_prompt_ids(prompt_of(prompt_tokens)))
    specs = [RequestSpec(f"R0·{i + 1}", "p", new, prompt_ids=ids, group=group) for i in range(n)]
    config = EngineConfig(slots=n, kv_budget=budget, kv_block_size=block)
    scheduler = ContinuousScheduler(config, specs)
    b = scheduler.blocks
    return Lane("c", scheduler, SimRunner(n, b.num_blocks, b.block_size, b.host_blocks), kv_capacity=0)


def step_checked(lane: Lane, reader: MapReader):
    record = lane.step()
    check_blocks(lane, record, reader)
    return record


@pytest.mark.parametrize("prompt_tokens", [40, 49, 48])  # a partial last block; one new block; a full last block
def test_siblings_share_their_prompt_blocks_and_copy_the_last_partial_one(prompt_tokens):
    lane, reader = sibling_lane(3, prompt_tokens), MapReader()
    first = step_checked(lane, reader)
    assert first.admitted == ("R0·1",)  # the others wait for their leader's prompt
    leader_table = list(lane.scheduler.blocks.tables["R0·1"])
    out = lane.scheduler.schedule(lane.clock)  # the siblings fork as they are admitted
    assert [r.id for r in out.admitted] == ["R0·2", "R0·3"]
    b, size, p = lane.scheduler.blocks, 16, prompt_tokens
    shared = (p - 1) // size  # full blocks before the last prompt position: shared by all three
    for rid in ("R0·2", "R0·3"):
        table = b.tables[rid]
        assert table[:shared] == leader_table[:shared]
        assert all(b.refs[x] == 3 for x in table[:shared])
        row = next(row for row in out.rows if row.request.id == rid)
        assert row.token_ids == [ids_last(lane, rid)] and row.start == p - 1  # recomputes the last prompt token
    if (p - 1) % size:  # the partial block holding position p - 1 is copied before each sibling writes into it
        assert sorted(src for src, _ in out.copies) == [leader_table[shared]] * 2
        assert len({dst for _, dst in out.copies}) == 2
    else:
        assert out.copies == []
    lane.scheduler.update_from_output(out, lane.runner.run(out.rows, copies=out.copies).tokens)
    lane.scheduler.release()
    while not lane.done:
        lane.step()
    assert all(len(r.output_ids) == 6 for r in lane.requests)
    assert not b.tables and sum(b.refs) == 0


def ids_last(lane, rid):
    return next(r for r in lane.requests if r.id == rid).spec.prompt_ids[-1]


def test_siblings_hold_fewer_blocks_than_the_same_requests_alone():
    together = sibling_lane(4, 100, new=4)
    alone = sibling_lane(4, 100, new=4, group=None)
    peak = {}
    for name, lane in (("together", together), ("alone", alone)):
        reader, most = MapReader(), 0
        while not lane.done:
            most = max(most, step_checked(lane, reader).kv_blocks_used)
        peak[name] = most
    assert peak["together"] < peak["alone"]


@pytest.mark.parametrize("options, field, words", [
    ({"kv_allocation": "lazy"}, "kv_allocation", "must be one of paged, reserve"),
    ({"preemption": "drop", "kv_budget": 256}, "preemption", "must be one of recompute, swap"),
    ({"preemption": "swap"}, "preemption", "needs a kv_budget"),
    ({"lanes": [{"name": "s", "policy": "static", "preemption": "swap", "kv_budget": 256}]}, "lanes[0].preemption",
     "applies to continuous"),
    ({"lanes": [{"name": "c", "policy": "continuous", "kv_allocation": 3}]}, "lanes[0].kv_allocation", "must be one of"),
])
def test_bad_options_are_refused_naming_the_field(options, field, words):
    with pytest.raises(WorkloadError) as e:
        parse_workload({"name": "t", "requests": [req("R0", 4)], **options})
    assert e.value.field == field and words in str(e.value)


def test_a_budget_too_small_for_a_request_is_refused_on_a_reserve_lane():
    with pytest.raises(WorkloadError) as e:
        start([req("R0", 40, prompt=100)], [{"name": "r", "policy": "continuous", "kv_allocation": "reserve"}],
              kv_budget=128)
    assert e.value.field == "requests[0].max_new_tokens" and "KV budget" in str(e.value)


def test_a_lane_pool_is_its_budget_or_what_its_requests_need():
    run = start([req("R0", 10, prompt=40), req("R1", 20, prompt=60)],
                [{"name": "budget", "policy": "continuous", "kv_budget": 16 * 7 + 5}, "continuous"], slots=3)
    budget, free = run.lanes["budget"], run.lanes["continuous"]
    assert budget.scheduler.blocks.num_blocks == 7 and budget.runner.num_blocks == 7
    assert free.scheduler.blocks.num_blocks == 3 * blocks_for(60 + 20, 16)  # every slot its longest request
    assert budget.runner.kv_bytes == 7 * 16 * 30 * 2 * 3 * 64 * 4
    run.run_to_end()
    first, later = budget.records[0].to_dict(), budget.records[1].to_dict()
    assert first["kv_pool"] == {"kv_bytes": budget.runner.kv_bytes, "num_blocks": 7, "block_size": 16,
                                "host_blocks": 0, "kv_allocation": "paged", "preemption": "recompute"}
    assert "kv_pool" not in later  # on the first record only: stored runs stay small


def test_a_step_record_writes_the_memory_map_only_where_it_changed():
    run = run_checked(start([req("R0", 3, prompt=40), req("R1", 3, prompt=40, arrival=1)], ["continuous"], slots=2))
    dicts = [r.to_dict() for r in run.lanes["continuous"].records]
    assert dicts[0]["kv_tables"] == {"R0": [0, 1, 2]} and dicts[0]["kv_tokens"] == {"R0": 40}
    assert "kv_dropped" not in dicts[0] and "kv_swapped" not in dicts[0] and "copy_ms" not in dicts[0]
    assert "kv_tables" not in dicts[2] or "R0" not in dicts[2]["kv_tables"]  # R0's table did not change
    assert any("R0" in d.get("kv_dropped", ()) for d in dicts)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(59, 100), st.integers(1, 20), st.integers(1, 4), st.integers(0, 5)),
                min_size=1, max_size=4),
       st.integers(2, 6), st.sampled_from([None, 12, 24]), st.sampled_from([None, 8]), st.sampled_from([None, 16]),
       st.booleans(), st.sampled_from(["paged", "reserve"]), st.sampled_from(["recompute", "swap"]))
@example([(62, 20, 1, 3), (82, 17, 2, 4)], 2, 12, 8, None, True, "paged", "swap")  # a sibling forks a swapped-in leader
def test_block_invariants_hold_with_siblings(groups, slots, budget_blocks, chunk, max_tokens, cached, allocation,
                                             preemption):
    """Groups of `n` siblings (several prompts, arrivals) on a continuous lane: every step keeps the invariants."""
    specs = []
    for g, (tokens, new, n, arrival) in enumerate(groups):
        ids = tuple(sim_prompt_ids(prompt_of(tokens, SHARED if g % 2 else "")))
        specs += [RequestSpec(f"R{g}·{i + 1}", "p", new, prompt_ids=ids, group=f"R{g}", arrival=arrival)
                  for i in range(n)]
    if budget_blocks is None:
        preemption = "recompute"
    config = EngineConfig(slots=slots, kv_budget=None if budget_blocks is None else 16 * budget_blocks,
                          chunk_size=chunk, max_batch_tokens=max_tokens and max(max_tokens, slots),
                          prefix_cache=cached, kv_allocation=allocation, preemption=preemption)
    scheduler = ContinuousScheduler(config, specs)
    b = scheduler.blocks
    lane, reader = Lane("c", scheduler, SimRunner(slots, b.num_blocks, b.block_size, b.host_blocks), 0), MapReader()
    while not lane.done:
        step_checked(lane, reader)
        assert len(lane.records) < 3000
    assert [len(r.output_ids) for r in scheduler.requests] == [s.max_new_tokens for s in specs]
    assert not b.tables and not b.host_tables and sum(b.refs) == 0


def test_a_sibling_forking_a_swapped_in_leader_does_not_cache_the_blocks_they_share():
    """A swap-in gives the leader fresh copies of its blocks, uncached; a sibling that forks them and then computes its
    last prompt token must not name them in the prefix cache as its own (the leader holds them too)."""
    size, prompt = 16, sim_prompt_ids(prompt_of(40))
    b = BlockManager(3, size, PrefixCache(size), host_blocks=3)
    leader, sibling = (Request(RequestSpec(rid, "p", 4, prompt_ids=tuple(prompt), group="R0"), order=i)
                       for i, rid in enumerate(("L", "S")))
    for r in (leader, sibling):
        r.start_prefill()
    b.grow(leader, 40)  # 1) the leader computes its prompt: its two full blocks join the cache
    b.prefix.add_computed(leader, 40, b.tables["L"])
    b.prefix.commit()
    leader.num_cached = leader.num_prefilled = 40
    b.swap_out(leader)  # 2) swapped out, then back in: the pool is full, so its cached blocks are evicted for copies
    b.swap_in(leader)
    assert not b.prefix.by_id and sorted(b.tables["L"]) == [0, 1, 2]
    b.fork(sibling, leader, 39)  # 3) the sibling shares all three and recomputes position 39
    sibling.num_cached = sibling.num_prefilled = 39
    b.prefix.add_computed(sibling, 40, b.tables["S"])
    assert b.tables["S"][:2] == b.tables["L"][:2] and all(b.refs[x] == 2 for x in b.tables["L"][:2])
    assert not any(b.is_cached(x) for x in b.tables["S"]), "a block two tables hold cached as one request's"
    assert all(c.refs == b.refs[c.id] for c in b.prefix.by_id.values()), "prefix refs disagree with the tables"
