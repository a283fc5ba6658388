"""Token-exactness: in float32, every lane writes for every request exactly what model.generate(do_sample=False)
writes for that request alone, on a tiny random Llama and on the real SmolLM2."""
from dataclasses import replace

import pytest
import torch

from tests.kit.reference import PROMPTS, check_against_solo, run_lanes, solo_generate


@pytest.fixture(scope="module")
def tiny_eos(tiny):
    """The tiny model with an EOS id chosen so that some requests stop early: the 4th token it writes for PROMPTS[1]."""
    ref = solo_generate(tiny, tiny.encode_prompt(PROMPTS[1]), 8)
    return replace(tiny, eos_ids=frozenset({ref[3]}))


def test_the_references_memo_answers_what_a_fresh_generate_writes(tiny):
    """solo_generate() answers a shorter ask, or a longer one after an EOS stop, from the longest answer it kept:
    exactly what generate() writes when asked afresh."""
    from tests.kit import reference
    prompt = tiny.encode_prompt(PROMPTS[2])
    eos = (solo_generate(tiny, prompt, 8)[3],)
    asks = [(12, ()), (5, ()), (12, eos), (20, eos), (2, eos)]
    remembered = [solo_generate(tiny, prompt, n, e) for n, e in asks]
    fresh = []
    for n, e in asks:
        reference._ANSWERS.pop(tiny.model, None)
        fresh.append(solo_generate(tiny, prompt, n, e))
    assert remembered == fresh and [len(a) for a in fresh] == [12, 5, 4, 4, 2]


@pytest.mark.parametrize("fused", [False, True])
def test_tiny_model_every_lane_matches_solo_generate(tiny_eos, fused):
    requests = [{"id": f"R{i}", "prompt": p, "max_new_tokens": 3 + (5 * i) % 11, "ignore_eos": i % 3 == 0,
                 "arrival": [0, 0, 1, 3, 3, 4, 9, 10][i]} for i, p in enumerate(PROMPTS)]
    run = run_lanes(tiny_eos, requests, slots=3, max_wait=2, fused=fused)
    assert check_against_solo(tiny_eos, run, tiny_eos.eos_ids) >= 1
    if fused:
        assert any(r.forward == "fused" for r in run.lanes["continuous"].records)
    else:
        assert any(r.forward == "split" for r in run.lanes["continuous"].records)


def test_tiny_model_many_slots_and_slot_reuse(tiny_eos):
    requests = [{"id": f"R{i}", "prompt": PROMPTS[i % 8] * (1 + i % 3), "max_new_tokens": 2 + i % 7,
                 "ignore_eos": False, "arrival": i // 2} for i in range(20)]
    run = run_lanes(tiny_eos, requests, slots=8, lanes=("continuous", "static"))
    check_against_solo(tiny_eos, run, tiny_eos.eos_ids)


def test_right_padding_breaks_exactness_and_left_padding_keeps_it(tiny):
    """The trap the engine avoids: a right-padded batch reads its next token after the pad, not after the prompt."""
    short, long = tiny.encode_prompt(PROMPTS[0]), tiny.encode_prompt(PROMPTS[2])
    refs = [solo_generate(tiny, ids, 6) for ids in (short, long)]
    n = len(long)

    def batch(side: str) -> list[list[int]]:
        pad = [tiny.pad_id] * (n - len(short))
        ids = torch.tensor([short + pad if side == "right" else pad + short, long])
        mask = torch.tensor([[1] * len(short) + [0] * len(pad) if side == "right" else [0] * len(pad) + [1] * len(short),
                             [1] * n])
        from transformers import GenerationConfig
        cfg = GenerationConfig(max_new_tokens=6, do_sample=False, pad_token_id=tiny.pad_id, eos_token_id=None)
        with torch.inference_mode():
            return tiny.model.generate(ids, attention_mask=mask, generation_config=cfg)[:, n:].tolist()

    assert batch("left") == refs
    assert batch("right")[0] != refs[0]


@pytest.mark.model
def test_smollm2_every_lane_matches_solo_generate(smol):
    requests = [{"id": f"R{i}", "prompt": p, "max_new_tokens": [24, 6, 16, 10, 20, 24, 12, 8][i],
                 "ignore_eos": i in (1, 7), "arrival": [0, 0, 0, 1, 2, 2, 5, 6][i]} for i, p in enumerate(PROMPTS)]
    run = run_lanes(smol, requests, slots=4, max_wait=3)
    assert check_against_solo(smol, run, smol.eos_ids) >= 2  # chat answers end by themselves


@pytest.mark.model
def test_smollm2_text_is_the_decoded_tokens(smol):
    run = run_lanes(smol, [{"id": "A", "prompt": "What is the capital of France?", "max_new_tokens": 12,
                            "ignore_eos": False}], slots=2, lanes=("continuous",))
    (req,) = run.lanes["continuous"].requests
    assert "Paris" in smol.decode(req.output_ids)
    streamed = "".join(c.token for r in run.lanes["continuous"].records for c in r.slots if c.token)
    assert streamed == smol.decode(req.output_ids)


@pytest.mark.model
def test_special_tokens_are_marked_as_tokens_not_text(smol):
    """With ignore_eos the model writes on past <|im_end|>: those cells say `special`, the words around them don't."""
    run = run_lanes(smol, [{"id": "A", "prompt": "What is the capital of France?", "max_new_tokens": 14,
                            "ignore_eos": True}], slots=1, lanes=("continuous",))
    cells = [c for r in run.lanes["continuous"].records for c in r.slots if c.token_id is not None]
    assert {c.token for c in cells if c.special} >= {"<|im_end|>"}
    assert all(c.special == (c.token_id in smol.special_ids) for c in cells) and not cells[0].special
    assert any(c.to_dict().get("special") is True for c in cells) and "special" not in cells[0].to_dict()


def count_preemptions_and_chunks(run) -> tuple[int, int]:
    recs = run.lanes["continuous"].records
    preempted = sum(len(r.preempted) for r in recs)
    partial = sum(1 for r in recs for c in r.slots if c.prefill and c.prefill[0] < c.prefill[1])
    return preempted, partial


@pytest.mark.parametrize("lm_name", ["tiny_eos", pytest.param("smol", marks=pytest.mark.model)])
def test_chunked_prefill_and_preemption_keep_tokens_exact(request, lm_name):
    lm = request.getfixturevalue(lm_name)
    requests = [{"id": f"R{i}", "prompt": p, "max_new_tokens": [30, 24, 28, 20, 26][i], "ignore_eos": i % 2 == 0,
                 "arrival": [0, 0, 1, 2, 3][i]} for i, p in enumerate(PROMPTS[:5])]
    # 4 slots but KV for fewer: decodes run out of blocks and the newest is preempted, then recomputed;
    # prompts (33-57 tokens) are prefilled 16 tokens at a time beside the others' decodes
    run = run_lanes(lm, requests, slots=4, lanes=("continuous", "static"), chunk_size=16, kv_budget=128,
                    kv_block_size=16)
    preempted, partial = count_preemptions_and_chunks(run)
    assert preempted >= 1 and partial >= 3
    check_against_solo(lm, run, lm.eos_ids)
