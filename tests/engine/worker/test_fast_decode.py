"""The fast decode step (engine/worker/fast_decode.py) writes exactly the tokens of the eager path (transformers' forward),
on the tiny random Llama and on the real SmolLM2, on every lane; models it cannot run fall back to the eager path."""
from dataclasses import replace

import pytest
import torch

from engine.worker import fast_decode
from engine.sched.batch import Row
from engine.worker.fast_decode import FastDecode, graph_bucket, rms_norm, unsupported
from engine.worker.linears import additive_mask
from engine.request import Request, RequestSpec
from engine.worker.runner import ModelRunner
from engine.step import SlotState
from tests.kit.reference import PROMPTS, check_against_solo, outputs, run_lanes


@pytest.fixture
def decode_calls(monkeypatch) -> list[int]:
    """Rows of every call the fast step computed (the real method, counted)."""
    calls, real = [], FastDecode.decode

    def counted(self, ids, *args, **kwargs):
        calls.append(len(ids))
        return real(self, ids, *args, **kwargs)

    monkeypatch.setattr(FastDecode, "decode", counted)
    return calls


def mixed_requests(n: int) -> list[dict]:
    """Staggered arrivals and lengths: joins mid-run, slot reuse, gaps among the running slots."""
    return [{"id": f"R{i}", "prompt": PROMPTS[i % 8] * (1 + i % 2), "max_new_tokens": 3 + (7 * i) % 13,
             "ignore_eos": True, "arrival": [0, 0, 1, 3, 3, 4, 6, 9, 9, 10][i % 10]} for i in range(n)]


def both_paths(lm, requests, slots, lanes=("static", "dynamic", "continuous"), **options):
    return (run_lanes(replace(lm, decode_step="eager"), requests, slots, lanes, max_wait=2, **options),
            run_lanes(lm, requests, slots, lanes, max_wait=2, **options))


def test_tiny_model_fast_decode_writes_the_eager_tokens_on_every_lane(tiny, decode_calls):
    eager, fast = both_paths(tiny, mixed_requests(10), slots=4)
    assert outputs(fast) == outputs(eager)
    assert decode_calls and max(decode_calls) >= 2  # the fast step ran, on calls of several rows
    assert eager.lanes["continuous"].runner.fast is None and fast.lanes["continuous"].runner.fast is not None


def test_tiny_model_fast_decode_matches_solo_generate_with_gaps_and_fused_steps(tiny, decode_calls):
    """8 slots, requests of varied lengths leave gaps among the running slots (filler rows or gathered K/V)."""
    requests = [{"id": f"R{i}", "prompt": PROMPTS[i % 8], "max_new_tokens": [2, 9, 3, 12, 4, 10, 5, 8, 6, 7][i],
                 "ignore_eos": True, "arrival": i // 3} for i in range(10)]
    for fused in (False, True):
        run = run_lanes(tiny, requests, slots=8, lanes=("continuous", "static"), fused=fused)
        check_against_solo(tiny, run, frozenset())
    def gapped(record) -> bool:  # decode slots that are not one contiguous run: filler rows or gathered K/V
        slots = [i for i, c in enumerate(record.slots) if c.state.value == "decode"]
        return bool(slots) and slots[-1] - slots[0] + 1 > len(slots)
    assert any(gapped(r) for r in run.lanes["continuous"].records)


def test_rms_norm_is_llamas_bit_for_bit(tiny):
    norm = tiny.model.model.layers[0].input_layernorm
    x = torch.randn(5, tiny.model.config.hidden_size)
    with torch.inference_mode():
        assert torch.equal(rms_norm(norm, x), norm(x))
        assert torch.equal(rms_norm(norm, x.bfloat16()), norm.bfloat16()(x.bfloat16()))
    norm.float()


def test_a_model_it_cannot_run_takes_the_eager_path(tiny):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1)
    config = LlamaConfig(vocab_size=tiny.model.config.vocab_size, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, attention_bias=True,
                         initializer_range=0.2, attn_implementation="sdpa")
    biased = replace(tiny, model=LlamaForCausalLM(config).eval())
    assert unsupported(biased.model) == "biased linears"
    assert ModelRunner(biased, 2, 64).fast is None
    run = run_lanes(biased, mixed_requests(4), slots=2, lanes=("continuous",))
    check_against_solo(biased, run, frozenset())


def test_graph_buckets_are_powers_of_two_up_to_the_slots():
    assert [graph_bucket(n, 8) for n in range(1, 9)] == [1, 2, 4, 4, 8, 8, 8, 8]
    assert [graph_bucket(n, 6) for n in (5, 6)] == [6, 6]


def test_fused_weights_are_made_once_per_model(tiny):
    ModelRunner(tiny, 2, 64), ModelRunner(tiny, 4, 128)
    first = fast_decode._WEIGHTS[tiny.model]
    ModelRunner(tiny, 3, 32)
    assert fast_decode._WEIGHTS[tiny.model] is first


@pytest.mark.model
def test_smollm2_fast_decode_writes_the_eager_tokens_and_generates_tokens(smol, decode_calls):
    """The real model: every lane, fast and eager, equal; and both equal solo generate()."""
    requests = [{"id": f"R{i}", "prompt": p, "max_new_tokens": [20, 6, 14, 10, 16, 12][i], "ignore_eos": i % 2 == 0,
                 "arrival": [0, 0, 1, 2, 2, 5][i]} for i, p in enumerate(PROMPTS[:6])]
    eager, fast = both_paths(smol, requests, slots=4)
    assert outputs(fast) == outputs(eager)
    check_against_solo(smol, fast, smol.eos_ids)
    assert decode_calls and max(decode_calls) >= 3


def packed_logits_both_ways(lm, joiner: slice, exact_tables: bool) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The logits of one fused step (two decoders beside the tokens `joiner` of a prompt whose first 3 are in its
    blocks) through the compiled step, each token a row, and through transformers' packed forward, on the same K/V;
    and the token rows of the step. A joiner that stops short of its prompt's end is a partial chunk (no logits);
    `exact_tables`: each row's table only as long as it needs (shorter than the step's widest), else 8 blocks."""
    runner = ModelRunner(lm, 4, 4 * 8, fused=True)
    assert runner.compiled_packs
    prompts = [lm.encode_prompt(p) for p in PROMPTS[:3]]
    reqs = [Request(RequestSpec(id=f"R{i}", prompt="", max_new_tokens=4), order=i) for i in range(3)]
    need = [len(prompts[0]) + 1, len(prompts[1]) + 1, joiner.stop or len(prompts[2])]
    tables = [tuple(range(8 * slot, 8 * slot + (-(-n // 16) if exact_tables else 8))) for slot, n in enumerate(need)]
    prefill = [Row(i, reqs[i], SlotState.PREFILL, prompts[i][:n], 0, True, blocks=tables[i])
               for i, n in ((0, None), (1, None), (2, 3))]
    runner.run(prefill)                                   # the decoders' prompts, and the joiner's first 3 tokens
    step = [Row(i, reqs[i], SlotState.DECODE, [100 + i], len(prompts[i]), True, blocks=tables[i]) for i in (0, 1)]
    tokens = prompts[2][joiner]
    step.insert(1, Row(2, reqs[2], SlotState.PREFILL, tokens, 3, 3 + len(tokens) == len(prompts[2]), blocks=tables[2]))
    seen = []
    runner.pick = lambda logits, wanted: seen.append(logits) or {}
    runner.run(step)                                      # through the compiled step
    fast, runner.fast = runner.fast, None
    runner.run(step)                                      # through transformers, rewriting the same K/V
    runner.fast = fast
    return seen[0], seen[1], sum(len(r.token_ids) for r in step)


@pytest.mark.parametrize("joiner, exact_tables", [(slice(3, None), False), (slice(3, 8), True)])
def test_tiny_model_packed_step_through_the_compiled_kernels_is_transformers_packed_forward(tiny, decode_calls,
                                                                                            joiner, exact_tables):
    """The whole rest of a prompt (over 16 token rows: oneDNN's linears), and a 5-token partial chunk (7 rows: the
    panel kernel, torch alone on its thread) with each table only as long as its row needs."""
    compiled, eager, rows = packed_logits_both_ways(tiny, joiner, exact_tables)
    assert decode_calls[-1] == rows and (rows > 16) == (joiner.stop is None)  # the step went through the fast step
    wants = 3 if joiner.stop is None else 2                                   # a partial chunk wants no token
    assert compiled.shape == eager.shape == (wants, tiny.model.config.vocab_size)
    assert (compiled - eager).abs().max().item() < 1e-4
    assert torch.equal(compiled.argmax(-1), eager.argmax(-1))


@pytest.mark.model
def test_smollm2_packed_step_through_the_compiled_kernels_is_transformers_packed_forward(smol):
    for joiner, exact in ((slice(3, None), False), (slice(3, 8), True)):
        compiled, eager, _ = packed_logits_both_ways(smol, joiner, exact)
        assert (compiled - eager).abs().max().item() < 1e-3
        assert torch.equal(compiled.argmax(-1), eager.argmax(-1))


@pytest.mark.model
def test_smollm2_fast_hidden_state_is_the_eager_one(smol):
    """One decode call of 3 rows of different lengths: the fast step's logits equal transformers' to float noise."""
    runner = ModelRunner(smol, 4, 4 * 8)
    prompts = [smol.encode_prompt(p) for p in PROMPTS[:3]]
    tables = [tuple(range(8 * slot, 8 * slot + 8)) for slot in range(3)]
    with torch.inference_mode():
        for slot, ids in enumerate(prompts):  # each prompt's K/V into its slot's blocks, through transformers' forward
            runner.cache.plan([tables[slot]], [list(range(len(ids)))], len(ids))
            smol.model.model(input_ids=torch.tensor([ids]), position_ids=torch.arange(len(ids))[None],
                             cache=runner.cache, use_cache=True)
        nxt, pos = [100, 200, 300], [len(p) for p in prompts]
        kv_len = max(pos) + 1
        fast = runner.fast.decode(nxt, pos, [True] * 3, tables, kv_len, True, [0, 1, 2])
        runner.cache.plan(tables, [[p] for p in pos], kv_len)
        visible = torch.arange(kv_len) <= torch.tensor(pos)[:, None, None]  # (B, 1, kv_len): rows of unequal length
        mask = additive_mask(visible, smol.dtype)[:, None]
        hidden = smol.model.model(input_ids=torch.tensor(nxt)[:, None], position_ids=torch.tensor(pos)[:, None],
                                  attention_mask=mask, cache=runner.cache, use_cache=True).last_hidden_state
        eager = smol.model.lm_head(hidden[:, -1])
    assert (fast - eager).abs().max().item() < 1e-3
    assert torch.equal(fast.argmax(-1), eager.argmax(-1))


def test_what_a_cuda_graph_captures_computes_the_sliced_steps_logits(tiny):
    """The graph's arithmetic, run eagerly on the CPU: whole block tables under a mask built from the positions, the
    call padded to its bucket with copies of its first row that write back what that row writes, give the sliced
    call's logits."""
    runner = ModelRunner(tiny, 8, 8 * 3)
    fast = runner.fast
    prompts = [tiny.encode_prompt(p)[:20 + 3 * i] for i, p in enumerate(PROMPTS[:3])]
    tables = [tuple(range(3 * slot + 6, 3 * slot + 9)) for slot in range(3)]
    with torch.inference_mode():
        for slot, ids in enumerate(prompts):
            runner.cache.plan([tables[slot]], [list(range(len(ids)))], len(ids))
            tiny.model.model(input_ids=torch.tensor([ids]), position_ids=torch.arange(len(ids))[None],
                             cache=runner.cache, use_cache=True)
        nxt, pos = [11, 12, 13], [len(p) for p in prompts]
        before = runner.cache.pool.clone()
        sliced = fast.decode(nxt, pos, [True] * 3, tables, max(pos) + 1, True, [0, 1, 2])
        runner.cache.pool.copy_(before)
        bucket, width = fast.bucket(3, max(pos) + 1)
        pad = bucket - 3
        t = lambda values: torch.tensor(values)  # noqa: E731
        graphed = fast.graph_step(t(nxt + nxt[:1] * pad), t(pos + pos[:1] * pad),
                                  t([list(tb[:width]) for tb in tables + tables[:1] * pad]),
                                  t([0, 1, 2] + [0] * pad), t([True] * bucket))[:3]
        changed = (runner.cache.pool != before).flatten(0, 1).flatten(1, 2).any(-1).any(-1)  # (L * 2, N * bs)
    written = {tb[p // 16] * 16 + p % 16 for tb, p in zip(tables, pos)}
    assert {int(i) for i in changed.nonzero()[:, 1]} == written  # the padded rows wrote nothing of their own
    assert bucket == 4 and (graphed - sliced).abs().max().item() < 1e-4
    assert torch.equal(graphed.argmax(-1), sliced.argmax(-1))
