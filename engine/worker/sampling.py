"""Sampling a request's next token from its logits: temperature and top_p, with the request's own random stream.

What it does not know: batches, slots or which rows want a token (the runner picks the logits); greedy decoding
is the runner's argmax and never comes here.
"""
import torch

from engine.request import Request


def sample(logits: torch.Tensor, request: Request, device: torch.device) -> int:
    """A token drawn from softmax(logits / temperature), cut to the top_p nucleus, with the request's own
    generator (seeded by its `seed`, else at random): a seeded request draws the same tokens whatever else
    shares its batch, since nothing else touches its generator."""
    spec = request.spec
    if request.rng is None:
        request.rng = torch.Generator(device=device)
        if spec.seed is None:
            request.rng.seed()
        else:
            request.rng.manual_seed(spec.seed)
    probs = torch.softmax(logits.float() / spec.temperature, dim=-1)  # (V,)
    probs, order = probs.sort(descending=True)
    if spec.top_p < 1.0:
        keep = probs.cumsum(-1) - probs < spec.top_p  # tokens before the nucleus is full, and the one that fills it
        probs = probs * keep
    return int(order[torch.multinomial(probs, 1, generator=request.rng)])
