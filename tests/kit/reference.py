"""The exactness reference: what `model.generate(do_sample=False)` writes for one request alone, the prompts the
exactness tests share, and the helpers that run a workload through the lanes and compare every request with it."""
import weakref

import torch

from engine import Engine, parse_workload
from engine.worker.model import LoadedModel

PROMPTS = ["Hi", "What is the capital of France?",
           "Write one long sentence about the history of the Roman empire, its roads and its aqueducts.",
           "2+2?", "Name three colours of the rainbow, please.", "Why is the sky blue? Answer briefly.",
           "Translate 'good morning' into French.", "List two planets."]


def solo_generate(lm: LoadedModel, prompt_ids, max_new_tokens: int, eos_ids=()) -> list[int]:
    """What `model.generate(do_sample=False)` writes for one request alone (the exactness reference).

    Greedy decoding is a function of the prompt alone, token by token, so generate() with a smaller
    `max_new_tokens` writes a prefix of what it writes with a larger one, and one that stopped at EOS stops
    there for any larger budget: the session keeps each (model, prompt, EOS set)'s longest answer and
    answers shorter asks from it (many tests ask for the same prompts)."""
    answers = _ANSWERS.setdefault(lm.model, {})   # per model object, gone with it (an id could be reused)
    key = (tuple(prompt_ids), tuple(eos_ids))
    known, budget = answers.get(key, ([], -1))
    if max_new_tokens <= budget or len(known) < budget:   # covered, or known to stop at EOS before the budget
        return known[:max_new_tokens]
    from transformers import GenerationConfig

    # an empty eos list makes generate() ignore EOS (None would fall back to the model's own EOS)
    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=lm.pad_id,
                              eos_token_id=list(eos_ids))
    x = torch.tensor([list(prompt_ids)])
    with torch.inference_mode():
        out = lm.model.generate(x, attention_mask=torch.ones_like(x), generation_config=config)
    answer = out[0, x.shape[1]:].tolist()
    answers[key] = (answer, max_new_tokens)
    return list(answer)


_ANSWERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # model -> (prompt, EOS) -> (answer, budget)


def run_lanes(lm, requests, slots, lanes=("static", "dynamic", "continuous"), **options):
    """A whole run of `requests` on `lanes`: policy names, or lane objects (which the workload itself carries)."""
    engine = Engine(lm)
    objects = any(isinstance(lane, dict) for lane in lanes)
    wl = engine.prepare(parse_workload({"name": "exact", "slots": slots, "requests": requests, **options,
                                        **({"lanes": list(lanes)} if objects else {})}))
    run = engine.start(wl) if objects else engine.start(wl, list(lanes))
    run.run_to_end()
    return run


def outputs(run) -> dict[str, dict[str, list[int]]]:
    return {name: {r.id: r.output_ids for r in lane.requests} for name, lane in run.lanes.items()}


def check_against_solo(lm, run, eos_ids) -> int:
    """Assert every lane matches solo generate(); return how many requests stopped at EOS."""
    eos_stops = 0
    for spec in run.workload.requests:
        ref = solo_generate(lm, spec.prompt_ids, spec.max_new_tokens, () if spec.ignore_eos else eos_ids)
        for name, lane in run.lanes.items():
            got = next(r for r in lane.requests if r.id == spec.id)
            assert got.output_ids == ref, f"{name} lane, request {spec.id}"
        eos_stops += len(ref) < spec.max_new_tokens
    return eos_stops
