"""Parallel sampling: a request that asks for `n` samples of one prompt runs as n sibling requests.

The one rule, used by the workload (engine.workload.workload), the OpenAI endpoint's `n` (app.web.openai_api) and the page
(static/js/core/siblings.js):
- sibling i (1 to n) of request `R3` has the id `R3·i` (a middle dot, U+00B7) and `group` = "R3";
- its seed is the request's seed + (i - 1), wrapped into a signed 64-bit integer (no seed: each sibling draws
  its own at random). So sibling 1 is the request itself, and "sibling i equals a request alone with seed
  seed + i - 1" is what a test checks;
- n = 1 is no expansion at all: the request keeps its id and has no group.
Every sibling is a whole request of its own (its own Request, slot, generator and stop); the scheduler lets the
siblings of one group share the prompt's KV blocks (engine.kv.block_manager). This module knows request specs and
nothing of scheduling, tensors or the wire.
"""
from dataclasses import replace

from engine.spec import RequestSpec

SEP = "\u00b7"   # "R3·1": the middle dot between a request's id and its sample number
INT64_MIN = -2 ** 63


def sibling_id(parent: str, i: int) -> str:
    """The id of sample `i` (from 1) of request `parent`."""
    return f"{parent}{SEP}{i}"


def sibling_seed(seed: int | None, i: int) -> int | None:
    """Sample `i`'s seed: the request's seed + (i - 1), kept inside a signed 64-bit integer."""
    return None if seed is None else (seed + i - 1 - INT64_MIN) % 2 ** 64 + INT64_MIN


def expand(spec: RequestSpec, n: int) -> tuple[RequestSpec, ...]:
    """`spec` as its `n` siblings (n = 1: `spec` itself)."""
    assert n >= 1
    if n == 1:
        return (spec,)
    return tuple(replace(spec, id=sibling_id(spec.id, i), group=spec.id, seed=sibling_seed(spec.seed, i))
                 for i in range(1, n + 1))


def collapse(specs) -> list[tuple[RequestSpec, int]]:
    """The requests as they were written: each group's first sibling back as its request (its id, seed) with its
    n, every other spec with n = 1; in the order they come."""
    out, at = [], {}
    for spec in specs:
        if spec.group is None:
            out.append((spec, 1))
        elif spec.group in at:
            first, n = out[at[spec.group]]
            out[at[spec.group]] = (first, n + 1)
        else:
            at[spec.group] = len(out)
            out.append((replace(spec, id=spec.group, group=None), 1))
    return out


def written_index(specs, i: int) -> int:
    """Which written request (`requests[k]` of the workload) spec `i` of the expanded list comes from."""
    seen, k = set(), -1
    for spec in specs[:i + 1]:
        key = spec.id if spec.group is None else (SEP, spec.group)
        if key not in seen:
            seen.add(key)
            k += 1
    return k
