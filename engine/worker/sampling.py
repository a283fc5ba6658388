"""Sampling the next token of a step's sampled rows from their logits: temperature and top_p, each row with its
request's own random stream.

    sample_rows(logits (W, V), requests) -> one token id per row

A row's token is drawn by inverse transform: one uniform number from its request's generator (seeded by its `seed`,
else at random), placed on the cumulative sum of its probabilities. A seeded request draws the same tokens whatever
else shares its batch, since nothing else touches its generator, and a row costs one draw, not one per vocabulary
entry. The rows' softmax and cumulative sums are batched: on this 2-core CPU, 16 rows of 49,152 logits took 108 ms
a step when each row sorted its probabilities and drew with `torch.multinomial` (one exponential per entry), 24 ms
without the sort, ~6 ms batched this way (measured by hand, 2026-12-06), and about half that since (no division
at temperature 1, no copy of the rows when all of them draw, the last step of the sum found by a search instead of
a (W, V) comparison: the same tokens; scripts in the commit). top_p < 1 keeps the nucleus: the most probable tokens
up to the one that fills `top_p`, found among the `NUCLEUS_K` most probable where they hold it, else among all.

What it does not know: batches, slots or which rows want a token (the runner picks the logits); greedy decoding
is the runner's argmax and never comes here.
"""
import torch

from engine.request import Request

NUCLEUS_K = (256, 4096)  # top_p's looks: the nucleus among this many most probable tokens, else more, else all


def generator(request: Request, device: torch.device) -> torch.Generator:
    """The request's own random stream, made on its first draw."""
    if request.rng is None:
        request.rng = torch.Generator(device=device)
        if request.spec.seed is None:
            request.rng.seed()
        else:
            request.rng.manual_seed(request.spec.seed)
    return request.rng


def sample_rows(logits: torch.Tensor, requests: list[Request]) -> list[int]:
    """One token per row of `logits` (W, V), drawn as row i's request asks (temperature > 0, top_p)."""
    if not requests:
        return []
    device = logits.device
    temperatures = [r.spec.temperature for r in requests]
    scaled = logits.float()
    if any(t != 1.0 for t in temperatures):   # x / 1.0 is x: the clients that send none skip a (W, V) pass
        scaled = scaled / torch.tensor(temperatures, device=device, dtype=torch.float32)[:, None]
    probs = torch.softmax(scaled, dim=-1)                                                      # (W, V)
    u = torch.cat([torch.rand(1, generator=generator(r, device), device=device, dtype=torch.float64)
                   for r in requests])                                                          # (W,) in [0, 1)
    tokens = [None] * len(requests)
    whole = [i for i, r in enumerate(requests) if r.spec.top_p >= 1.0]
    if whole:
        rows = torch.tensor(whole, device=device)
        picked = draw((probs if len(whole) == len(requests) else probs[rows]).double().cumsum(-1), u[rows])
        for i, t in zip(whole, picked.tolist()):
            tokens[i] = t
    for i, r in enumerate(requests):
        if tokens[i] is None:
            tokens[i] = nucleus(probs[i], r.spec.top_p, u[i])
    return tokens


def draw(cdf: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Each row's index k with cdf[k - 1] <= u·total < cdf[k] (W,): a token of probability zero (an equal step
    of the sum) is never drawn; rounding that lands on the total takes the last token with any probability."""
    total = cdf[:, -1:].contiguous()                  # (W, 1)
    k = torch.searchsorted(cdf, u[:, None] * total, right=True).squeeze(1)
    last = torch.searchsorted(cdf, total).squeeze(1)  # the index of the last step up to the total (the sums below it)
    return torch.minimum(k, last)


def nucleus(probs: torch.Tensor, top_p: float, u: torch.Tensor) -> int:
    """A token of the top_p nucleus of `probs` (V,): the most probable tokens before their sum reaches top_p and
    the one that reaches it, drawn in proportion to their probabilities with the uniform `u`."""
    for k in (*NUCLEUS_K, probs.shape[0]):
        top, order = probs.topk(min(k, probs.shape[0]))   # descending
        if float(top.sum()) >= top_p:
            break
    keep = top.cumsum(-1) - top < top_p
    kept = top[keep].double()
    return int(order[draw(kept.cumsum(-1)[None], u[None])[0]])
