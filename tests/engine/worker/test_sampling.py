"""engine/worker/sampling.py: tokens drawn in proportion to their probabilities, the nucleus kept, each row with its
own request's stream, batched rows the same as rows alone."""
from types import SimpleNamespace

import pytest
import torch

from engine.worker import sampling
from engine.worker.sampling import draw, sample_rows


def request(seed: int | None = 0, temperature: float = 1.0, top_p: float = 1.0):
    return SimpleNamespace(spec=SimpleNamespace(seed=seed, temperature=temperature, top_p=top_p), rng=None)


def test_draws_land_on_the_token_whose_step_of_the_sum_holds_them():
    cdf = torch.tensor([[0.0, 0.25, 0.25, 1.0]], dtype=torch.float64)   # token 0 and 2: probability zero
    picks = [int(draw(cdf, torch.tensor([u], dtype=torch.float64))[0]) for u in (0.0, 0.1, 0.2499, 0.25, 0.9, 0.9999)]
    assert picks == [1, 1, 1, 3, 3, 3]
    assert int(draw(cdf, torch.tensor([1.0], dtype=torch.float64))[0]) == 3   # rounding onto the total


def test_frequencies_follow_the_probabilities_and_impossible_tokens_never_come():
    probs = torch.tensor([0.5, 0.3, 0.0, 0.2])
    logits = probs.log()                                                # -inf where the probability is zero
    r = request(seed=7)
    counts = torch.zeros(4)
    for _ in range(4000):
        counts[sample_rows(logits[None], [r])[0]] += 1
    assert counts[2] == 0
    assert torch.allclose(counts / 4000, probs, atol=0.03), counts / 4000


def test_temperature_sharpens_and_flattens():
    logits = torch.tensor([[2.0, 1.0, 0.0]])
    share = {}
    for t in (0.25, 4.0):
        r = request(seed=3, temperature=t)
        share[t] = sum(sample_rows(logits, [r])[0] == 0 for _ in range(2000)) / 2000
    assert share[0.25] > 0.95 and 0.3 < share[4.0] < 0.5


@pytest.mark.parametrize("k", [(256,), (2,), (1, 3)])   # the nucleus in the first look; in none; in the second
def test_top_p_keeps_the_nucleus_and_the_token_that_fills_it(monkeypatch, k):
    monkeypatch.setattr(sampling, "NUCLEUS_K", k)
    probs = torch.tensor([0.05, 0.4, 0.3, 0.15, 0.1])                   # sorted: 0.4, 0.3 (0.7), 0.15 (0.85), ...
    r = request(seed=11, top_p=0.8)
    seen = {sample_rows(probs.log()[None], [r])[0] for _ in range(600)}
    assert seen == {1, 2, 3}


def test_a_row_draws_the_same_tokens_alone_or_batched_and_seeds_differ():
    torch.manual_seed(0)
    logits = torch.randn(3, 1000) * 2
    def tokens(rows: list[int], seeds: list[int], top_p: float = 1.0) -> list[list[int]]:
        reqs = [request(seed=s, top_p=top_p) for s in seeds]
        return [sample_rows(logits[rows], reqs) for _ in range(20)]
    for top_p in (1.0, 0.9):
        alone = [t[0] for t in tokens([1], [42], top_p)]
        batched = [t[1] for t in tokens([0, 1, 2], [5, 42, 6], top_p)]
        other = [t[0] for t in tokens([1], [43], top_p)]
        assert alone == batched and alone != other
