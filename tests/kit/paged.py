"""Driving `ModelRunner.run` by hand over given block tables (the paged cache's tests and scripts/gpu_check.py)."""
import random

from engine.sched.batch import Row
from engine.request import Request, RequestSpec
from engine.worker.runner import ModelRunner
from engine.step import SlotState


def drive(runner: ModelRunner, prompts, tables, new_tokens: int, chunk: int | None = None, stagger: bool = False,
          ops: dict | None = None) -> list[list[int]]:
    """Greedy tokens of each prompt, run together through `runner` with row i reading through tables[i] (a list,
    may be changed by `ops`): prompts prefilled whole (or `chunk` tokens a step; `stagger`: request i joins at
    step i), then decoded one token a step. `ops`: step -> {"swap_out", "swap_in", "copies": block pairs applied
    before that step's forward, "tables": {row: new table}, "skip": rows not computed that step}."""
    requests = [Request(RequestSpec(id=f"T{i}", prompt="", max_new_tokens=new_tokens), order=i)
                for i in range(len(prompts))]
    done, out = [0] * len(prompts), [[] for _ in prompts]
    step = 0
    while any(len(o) < new_tokens for o in out):
        op = (ops or {}).get(step, {})
        for i, t in op.get("tables", {}).items():
            tables[i] = t
        rows = []
        for i, (p, r) in enumerate(zip(prompts, requests)):
            if len(out[i]) >= new_tokens or (stagger and i > step) or i in op.get("skip", ()):
                continue
            if done[i] < len(p):
                ids = p[done[i]:done[i] + (chunk or len(p))]
                rows.append(Row(i, r, SlotState.PREFILL, ids, done[i], done[i] + len(ids) == len(p),
                                blocks=tuple(tables[i])))
            else:
                rows.append(Row(i, r, SlotState.DECODE, out[i][-1:], len(p) + len(out[i]) - 1, True,
                                blocks=tuple(tables[i])))
        tokens = runner.run(rows, op.get("swap_out", ()), op.get("swap_in", ()), op.get("copies", ())).tokens
        for row in rows:
            done[row.slot] += len(row.token_ids) if row.state is SlotState.PREFILL else 0
            if row.wants_token:
                out[row.slot].append(tokens[row.slot])
        step += 1
    return out


def permuted_tables(num_blocks: int, rows: int, per_row: int, seed: int) -> list[list[int]]:
    ids = list(range(num_blocks))
    random.Random(seed).shuffle(ids)
    return [ids[i * per_row:(i + 1) * per_row] for i in range(rows)]
