"""Arrival processes: generate a request mix whose arrivals follow a Poisson or Gamma process.

    "generate": {"n": 16, "rate": 4, "burstiness": 1, "seed": 0,
                 "prompt_words": {"min": 8, "max": 40}, "output_tokens": [8, 16, 32], "ignore_eos": true}

As `vllm bench serve` draws them: the first request arrives at 0 ms and each gap is drawn from a Gamma
distribution with shape `burstiness` and mean 1 / `rate` seconds, so burstiness 1 is a Poisson process
and values below 1 are burstier. Lengths are drawn from a list (each value equally likely) or a
{"min", "max"} range (each integer equally likely). Prompts are `prompt_words` words of a built-in text
(most are one token each; the chat template adds ~30 more), or drawn from your own `prompts`. The
same spec and seed give the same requests, so a link or a file reproduces the mix; the result is an
ordinary list of requests with `arrival_ms`, to edit, share and export. This module knows request
dicts and nothing of the engine.
"""
import random

from engine.limits import Limits, WorkloadError, check_int, check_number, check_str, reject_unknown

GENERATE_KEYS = {"n", "rate", "burstiness", "seed", "prompt_words", "output_tokens", "prompts", "ignore_eos"}
MAX_RATE = 1000.0        # requests per second
MAX_BURSTINESS = 100.0
TEXT = ("the harbour master walked the length of both piers before dawn checked the mooring lines read the tide "
        "gauge and wrote the height of the water in a ledger kept in a tin box because the house was damp in "
        "winter in calm weather the fleet left on the morning tide and came back in the late afternoon and he "
        "counted the boats out and counted them in again when a boat was late he lit the lamp on the end of the "
        "north pier and kept it burning until the boat was safe inside the wall in storms the boats stayed in "
        "the gates of the inner basin were closed and he went round the moorings every two hours with a lantern "
        "doubling any line that had started to fray").split()


def arrival_times_ms(n: int, rate: float, burstiness: float, rng: random.Random) -> list[float]:
    """n arrival times in ms: 0, then gaps drawn from Gamma(shape=burstiness, mean=1/rate s), rounded to 0.1 ms."""
    theta = 1.0 / (rate * burstiness)  # the scale that makes the mean gap 1 / rate seconds
    times, t = [], 0.0
    for _ in range(n):
        times.append(round(t * 1000, 1))
        t += rng.gammavariate(burstiness, theta)
    return times


def _lengths(spec, where: str, lo: int, hi: int):
    """A draw function for a list of lengths or a {"min", "max"} range, checked against lo..hi."""
    if isinstance(spec, list):
        if not 1 <= len(spec) <= 100:
            raise WorkloadError(where, "must list 1 to 100 lengths")
        values = [check_int(v, f"{where}[{i}]", lo, hi) for i, v in enumerate(spec)]
        return lambda rng: rng.choice(values)
    if isinstance(spec, dict):
        reject_unknown(spec, {"min", "max"}, f"{where}.")
        a = check_int(spec.get("min"), f"{where}.min", lo, hi)
        b = check_int(spec.get("max"), f"{where}.max", a, hi)
        return lambda rng: rng.randint(a, b)
    raise WorkloadError(where, 'must be a list of lengths or {"min": a, "max": b}')


def generate_requests(spec, limits: Limits = Limits()) -> list[dict]:
    """The requests a `generate` spec describes (checked against `limits`; WorkloadError names the field)."""
    if not isinstance(spec, dict):
        raise WorkloadError("generate", f"must be an object, got {type(spec).__name__}")
    reject_unknown(spec, GENERATE_KEYS, "generate.")
    n = check_int(spec.get("n", 16), "generate.n", 1, limits.max_requests)
    rate = check_number(spec.get("rate", 1.0), "generate.rate", 0.001, MAX_RATE)
    burstiness = check_number(spec.get("burstiness", 1.0), "generate.burstiness", 0.01, MAX_BURSTINESS)
    seed = check_int(spec.get("seed", 0), "generate.seed", 0, 2**31 - 1)
    output = _lengths(spec.get("output_tokens", {"min": 8, "max": 32}), "generate.output_tokens", 1,
                      limits.max_new_tokens)
    ignore_eos = spec.get("ignore_eos", True)
    if not isinstance(ignore_eos, bool):
        raise WorkloadError("generate.ignore_eos", "must be true or false")
    if "prompts" in spec:
        if "prompt_words" in spec:
            raise WorkloadError("generate.prompts", "give prompts or prompt_words, not both")
        prompts = spec["prompts"]
        if not isinstance(prompts, list) or not 1 <= len(prompts) <= limits.max_requests:
            raise WorkloadError("generate.prompts", f"must be a list of 1 to {limits.max_requests} prompts")
        texts = [check_str(p, f"generate.prompts[{i}]", limits.max_prompt_chars) for i, p in enumerate(prompts)]

        def prompt(rng: random.Random) -> str:
            return rng.choice(texts)
    else:
        words = _lengths(spec.get("prompt_words", {"min": 8, "max": 40}), "generate.prompt_words", 1,
                         max(1, limits.max_prompt_chars // 12))

        def prompt(rng: random.Random) -> str:
            k, start = words(rng), rng.randrange(len(TEXT))
            return "Summarize this in one sentence: " + " ".join(TEXT[(start + i) % len(TEXT)] for i in range(k))
    rng = random.Random(seed)
    times = arrival_times_ms(n, rate, burstiness, rng)
    return [{"id": f"R{i + 1}", "prompt": prompt(rng), "max_new_tokens": output(rng), "ignore_eos": ignore_eos,
             "arrival_ms": t} for i, t in enumerate(times)]


def retime(requests: list[dict], rate: float, burstiness: float = 1.0, seed: int = 0) -> list[dict]:
    """The same requests (prompts and lengths kept, in order) with arrivals drawn at `rate` requests per second."""
    times = arrival_times_ms(len(requests), rate, burstiness, random.Random(seed))
    out = []
    for r, t in zip(requests, times):
        r = {k: v for k, v in r.items() if k != "arrival"}
        out.append({**r, "arrival_ms": t})
    return out
