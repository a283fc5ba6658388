"""Token-exactness on the paged KV cache: in float32 a reserve lane, a swap lane that swaps out and back in several
times, shared prefix blocks and siblings of one prompt each write, per request, exactly what generate() writes for
it alone. Reserve runs on any runner; swap and siblings copy blocks, which needs the runner that reads block tables
(branch `tensors`): those are marked `model` and run by the lead once it has landed."""
import pytest

from engine.config import EngineConfig
from engine.lane import Lane
from engine.sched.policies import ContinuousScheduler
from engine.request import RequestSpec
from engine.worker.runner import ModelRunner
from engine.step import SlotState
from tests.kit.reference import PROMPTS, check_against_solo, run_lanes, solo_generate

RESERVE = {"name": "reserve", "policy": "continuous", "kv_allocation": "reserve"}
SWAP = {"name": "swap", "policy": "continuous", "preemption": "swap"}
CACHED = {"name": "cached", "policy": "continuous", "prefix_cache": True}


def requests(n=6, new=24, together=False):
    return [{"id": f"R{i}", "prompt": PROMPTS[i % len(PROMPTS)] * (1 + i % 2), "max_new_tokens": new,
             "ignore_eos": True, "arrival": 0 if together else i // 2} for i in range(n)]


def swaps(lane) -> int:
    return sum(c.state is SlotState.SWAPPED for r in lane.records for c in r.slots)


def test_tiny_model_reserve_lane_matches_solo_generate(tiny):
    run = run_lanes(tiny, requests(n=5, new=12), slots=4, lanes=[RESERVE, "continuous"], kv_budget=16 * 10)
    check_against_solo(tiny, run, tiny.eos_ids)


@pytest.mark.model
def test_reserve_lane_matches_solo_generate(smol):
    run = run_lanes(smol, requests(), slots=4, lanes=[RESERVE, "continuous"], kv_budget=16 * 14)
    check_against_solo(smol, run, smol.eos_ids)


@pytest.mark.model
def test_swap_lane_swapping_out_and_in_several_times_matches_solo_generate(smol):
    run = run_lanes(smol, requests(new=60, together=True), slots=6, lanes=[SWAP], kv_budget=16 * 16)
    assert swaps(run.lanes["swap"]) >= 3  # (6 prompts of 31-49 tokens: 3 swaps out, each swapped back in)
    assert sum(n > 0 for r in run.lanes["swap"].records for n in (r.kv_swapped or {}).values()) >= 3
    check_against_solo(smol, run, smol.eos_ids)


@pytest.mark.model
def test_shared_prefix_blocks_match_solo_generate(smol):
    shared = "You are a museum guide: answer in one short, friendly sentence, and never guess. " * 2
    reqs = [{"id": f"R{i}", "prompt": shared + q, "max_new_tokens": 12, "ignore_eos": True, "arrival": i}
            for i, q in enumerate(["When do you open?", "Is there a cafe?", "Can I take photos?", "Where is the shop?"])]
    run = run_lanes(smol, reqs, slots=2, lanes=[CACHED, {**CACHED, "name": "cached swap", "preemption": "swap"}],
                    kv_budget=16 * 12)
    assert any(c.cached for r in run.lanes["cached"].records for c in r.slots)
    check_against_solo(smol, run, smol.eos_ids)


def sibling_outputs(lm, prompt: str, n: int, new: int, **sampling) -> list[list[int]]:
    ids = tuple(lm.encode_prompt(prompt))
    specs = [RequestSpec(f"R0·{i + 1}", prompt, new, prompt_ids=ids, group="R0",
                         **({k: v + i for k, v in sampling.items() if k == "seed"} |
                            {k: v for k, v in sampling.items() if k != "seed"})) for i in range(n)]
    scheduler = ContinuousScheduler(EngineConfig(slots=n), specs, eos_ids=frozenset(), pad_id=lm.pad_id)
    b = scheduler.blocks
    lane = Lane("siblings", scheduler, ModelRunner(lm, n, b.num_blocks, b.block_size, host_blocks=b.host_blocks),
                kv_capacity=0)
    while not lane.done:
        lane.step()
    assert any(r.copy_ms > 0 or r.kv_tables for r in lane.records)
    return [r.output_ids for r in scheduler.requests]


@pytest.mark.model
def test_greedy_siblings_each_equal_the_request_alone(smol):
    prompt = PROMPTS[2]
    alone = solo_generate(smol, smol.encode_prompt(prompt), 10)
    assert sibling_outputs(smol, prompt, 3, 10) == [alone] * 3


@pytest.mark.model
def test_seeded_sampled_siblings_each_equal_the_same_seed_alone(smol):
    prompt = PROMPTS[1]
    together = sibling_outputs(smol, prompt, 3, 10, temperature=0.8, seed=7)
    alone = [sibling_outputs(smol, prompt, 1, 10, temperature=0.8, seed=7 + i)[0] for i in range(3)]
    assert together == alone and len({tuple(t) for t in together}) > 1
