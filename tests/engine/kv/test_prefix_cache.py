"""Prefix caching (the `prefix_cache` lane option): hash chains of full blocks, LRU eviction within the KV
budget, hits recorded on the prefill cell, metrics, and token-exactness on a tiny random Llama (the real
model's test is the shared-instructions demo, tests/engine/test_demos.py)."""
import pytest

from engine import Engine, lane_metrics, parse_workload
from engine.kv.prefix_cache import PrefixCache, chain_hashes
from engine.request import Request, RequestSpec
from engine.workload.workload import WorkloadError
from tests.kit.reference import check_against_solo, solo_generate

SHARED = "Answer as a museum guide would: short, friendly, exact, and never more than two sentences. " * 3
QUESTIONS = ["When do you open?", "How much is a ticket?", "Can I take photos?", "Is there a cafe?",
             "Where is the shop?", "Do you have lockers?"]
CACHED = {"name": "cached", "policy": "continuous", "prefix_cache": True}


def workload(lanes, slots=2, arrivals=None, max_new=(4,) * 6, **options):
    requests = [{"id": f"R{i}", "prompt": SHARED + q, "max_new_tokens": max_new[i], "ignore_eos": True,
                 "arrival": i if arrivals is None else arrivals[i]} for i, q in enumerate(QUESTIONS)]
    return parse_workload({"name": "prefix", "slots": slots, "lanes": lanes, "requests": requests, **options})


def run(lm, wl):
    engine = Engine(lm)
    r = engine.start(engine.prepare(wl))
    r.run_to_end()
    return r


def request_of(ids: list[int], rid="A") -> Request:
    r = Request(RequestSpec(rid, "", 1, prompt_ids=tuple(ids)), order=0)
    r.start_prefill()
    return r


# -- the cache alone ------------------------------------------------------------------------------------
def test_a_block_hash_names_its_whole_prefix():
    a, b = chain_hashes(list(range(8)), 4), chain_hashes([9, 1, 2, 3, 4, 5, 6, 7], 4)
    assert len(a) == 2 and len(chain_hashes(list(range(7)), 4)) == 1  # full blocks only
    assert a[1] != b[1]  # same second block, different first: a different name


def test_match_takes_the_longest_ready_chain_and_leaves_the_last_token_to_compute():
    cache = PrefixCache(4)
    first = request_of(list(range(12)))
    assert cache.match(first) == []
    assert [start for _, start in cache.add_computed(first, 12)] == [0, 4, 8]
    assert cache.match(request_of(list(range(12)), "B")) == []  # computed this step: not ready yet
    cache.commit()
    assert len(cache.match(request_of(list(range(12)), "C"))) == 2  # the 3rd block holds the last token
    assert len(cache.match(request_of(list(range(9)) + [99, 98, 97, 96], "D"))) == 2
    assert len(cache.match(request_of([0, 1, 2, 9, 4, 5, 6, 7, 8], "E"))) == 0
    assert cache.num_shared == 4 and cache.num_unreferenced == 0  # blocks 0 and 1 held by A, C and D


def test_unheld_blocks_are_evicted_least_recently_used_tail_first():
    cache = PrefixCache(2)
    old, new = request_of([1, 2, 3, 4, 5]), request_of([7, 8, 9], "B")
    cache.add_computed(old, 4)
    cache.commit()
    cache.release(old)
    cache.add_computed(new, 2)
    cache.commit()
    cache.release(new)
    assert cache.num_unreferenced == 3
    cache.evict(1)  # old's blocks were released first; its tail goes before its head
    assert len(cache.match(request_of([1, 2, 3, 4, 5], "C"))) == 1
    cache.evict(1)  # now B's block is the oldest unheld one (C holds old's head)
    assert cache.match(request_of([7, 8, 9], "D")) == [] and cache.num_cached == 1


# -- the option at the edge -----------------------------------------------------------------------------
def test_the_option_is_refused_on_static_and_checked_as_a_boolean():
    with pytest.raises(WorkloadError, match=r"lanes\[0\]\.prefix_cache: applies to continuous lanes"):
        workload([{"name": "s", "policy": "static", "prefix_cache": True}])
    with pytest.raises(WorkloadError, match=r"lanes\[0\]\.prefix_cache: must be true or false"):
        workload([{"name": "c", "policy": "continuous", "prefix_cache": 1}])
    with pytest.raises(WorkloadError, match=r"^prefix_cache: must be true or false"):
        workload(["continuous"], prefix_cache="yes")
    wl = workload(["static", "continuous"], prefix_cache=True)  # a workload default: static keeps no cache
    r = run(None, wl)
    assert not any(c.cached for rec in r.lanes["static"].records for c in rec.slots)
    assert any(c.cached for rec in r.lanes["continuous"].records for c in rec.slots)


# -- the simulator: records, KV accounting, metrics ------------------------------------------------------
def test_a_hit_is_recorded_on_its_prefill_cell_and_computes_only_the_rest():
    r = run(None, workload(["continuous", CACHED]))
    plain, cached = (lane_metrics(r.lanes[n].records, r.workload) for n in ("continuous", "cached"))
    prompt = sum(len(s.prompt_ids) for s in r.workload.requests)
    shared = min(len(chain_hashes(list(s.prompt_ids), 16)) for s in r.workload.requests) * 16
    assert plain["prompt_tokens_computed"] == prompt and plain["prompt_tokens_cached"] == 0
    assert cached["prompt_tokens_cached"] == 5 * shared  # every request after the first hits the shared blocks
    assert cached["prompt_tokens_computed"] + cached["prompt_tokens_cached"] == prompt
    assert cached["prefix_cache_hit_rate"] == pytest.approx(5 * shared / prompt)
    cells = [c for rec in r.lanes["cached"].records for c in rec.slots if c.cached]
    assert [c.request for c in cells] == ["R1", "R2", "R3", "R4", "R5"]
    assert all(c.prefill == (c.prefill[1], c.prefill[1]) and c.to_dict()["cached"] == shared for c in cells)
    assert "cached" not in r.lanes["continuous"].records[0].slots[0].to_dict()
    sim_ms = {n: sum(rec.ms for rec in r.lanes[n].records) for n in r.lanes}
    assert sim_ms["cached"] < sim_ms["continuous"]  # the cost model computes only the uncached tokens


def test_a_shared_block_counts_once_and_unheld_cached_blocks_count_as_free():
    r = run(None, workload(["continuous", CACHED], slots=3, arrivals=[0, 1, 1, 9, 9, 9]))  # a pause between
    plain, cached = r.lanes["continuous"].records, r.lanes["cached"].records
    assert max(rec.kv_used for rec in cached) < max(rec.kv_used for rec in plain)
    assert any(rec.kv_blocks_cached > 0 for rec in cached) and not any(rec.kv_blocks_cached for rec in plain)
    for rec in cached:  # KV tokens fit the blocks counted
        assert rec.kv_used <= rec.kv_blocks_used * 16


def test_under_a_budget_unheld_blocks_are_evicted_lru_tail_first_never_over_it():
    """One slot, KV for 12 blocks: A's 7 cached blocks stay after it leaves; B (another prompt, but the same
    template block first) holds that block and needs 7 more, so A's 2 last blocks are evicted; C (A's prompt
    again) then hits A's first 5 and evicts 2 of B's to grow."""
    requests = [{"id": rid, "prompt": word * 60, "max_new_tokens": 4, "arrival": 0}
                for rid, word in (("A", "alpha "), ("B", "betas "), ("C", "alpha "))]
    wl = parse_workload({"name": "evict", "slots": 1, "lanes": [CACHED], "requests": requests, "kv_budget": 192})
    r = run(None, wl)
    recs, prefix = r.lanes["cached"].records, r.lanes["cached"].scheduler.prefix
    assert len(wl.requests[0].prompt) // 4 + 30 == 120  # 7 full blocks of 16
    assert all(rec.kv_blocks_used + rec.kv_blocks_cached <= rec.kv_blocks_total == 12 for rec in recs)
    hits = {c.request: c.cached for rec in recs for c in rec.slots if c.cached}
    assert hits == {"B": 16, "C": 80}
    assert prefix.num_evicted == 4


# -- the real computation, on a tiny random Llama --------------------------------------------------------
@pytest.mark.parametrize("options", [{}, {"chunk_size": 16}, {"fused": True}])
def test_tiny_model_writes_the_same_tokens_with_and_without_the_cache(tiny, options):
    r = run(tiny, workload(["continuous", CACHED], slots=3, arrivals=[0, 1, 1, 3, 4, 4],
                           max_new=(5, 3, 6, 4, 2, 5), **options))
    check_against_solo(tiny, r, frozenset())
    assert lane_metrics(r.lanes["cached"].records, r.workload)["prompt_tokens_cached"] >= 4 * 16


def test_tiny_model_stays_exact_through_preemption_and_eviction(tiny):
    r = run(tiny, workload([CACHED], slots=3, arrivals=[0, 0, 1, 2, 3, 3], max_new=(20, 16, 18, 12, 20, 14),
                           kv_budget=160, chunk_size=32))
    recs = r.lanes["cached"].records
    assert sum(len(rec.preempted) for rec in recs) >= 1
    assert any(c.cached for rec in recs for c in rec.slots)
    check_against_solo(tiny, r, frozenset())


def test_a_hit_reads_the_cached_kv_from_its_pool_blocks(tiny):
    """The cached K/V really is read (by reference, from the pool): corrupt the cached blocks no request holds and
    the hit's tokens change."""
    engine = Engine(tiny)
    wl = engine.prepare(workload([CACHED], slots=1, arrivals=[0, 1, 2, 3, 4, 5]))
    spec = wl.requests[1]
    ref = solo_generate(tiny, spec.prompt_ids, spec.max_new_tokens)
    runs = []
    for corrupt in (False, True):
        r = engine.start(wl)
        lane = r.lanes["cached"]
        while not any(c.cached for rec in lane.records for c in rec.slots):
            cached = lane.scheduler.blocks.cached_free()
            if corrupt and cached:
                lane.runner.cache.pool[:, :, cached] *= -3.0
            r.tick()
        r.run_to_end()
        runs.append(next(q for q in lane.requests if q.id == spec.id).output_ids)
    assert runs[0] == ref and runs[1] != ref
