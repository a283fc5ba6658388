"""Our compiled CPU kernels (engine/worker/cpu/) beside what they replace, call by call, on this CPU: the few-row
linear against oneDNN's packed linear, paged decode attention against a gather of the blocks and sdpa, the greedy
argmax against torch.argmax. Prints JSON (ms or µs a call, the median of 5 timings of N calls each, and the load);
nothing here asserts a timing.

    .venv/bin/python -m scripts.bench_kernels            # SmolLM2-135M's shapes, 1-16 rows
"""
import json
import os
import statistics
import time

from engine.threads import configure

configure()  # OMP_WAIT_POLICY=PASSIVE before torch loads OpenMP, as every entry point
import torch  # noqa: E402

from engine.worker.cpu import kernels  # noqa: E402
from engine.worker.linears import packed_weight  # noqa: E402

LINEARS = {"gate_up": (3072, 576), "down": (576, 1536), "lm_head": (49152, 576)}  # SmolLM2-135M's (N, K)
ROWS = (1, 4, 8, 16)
H, KV, D, BLOCK = 9, 3, 64, 16                                                  # its heads, K/V heads, head size


def per_call_us(fn, calls: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t) / calls * 1e6)
    return round(statistics.median(times), 1)


def linears(mod) -> dict:
    out = {}
    for name, (n, k) in LINEARS.items():
        w = torch.randn(n, k)
        panels, packed = kernels.panels(w), packed_weight(w)
        for rows in ROWS:
            x = torch.randn(rows, k)
            calls = 20 if name == "lm_head" else 200
            out[f"{name} {n}x{k}, {rows} rows"] = {
                "ours_us": per_call_us(lambda: mod.few_row_linear(x, panels), calls),
                "onednn_us": per_call_us(lambda: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], ""),
                                         calls)}
    return out


def attention(mod) -> dict:
    out, g = {}, torch.Generator().manual_seed(0)
    pool = 512
    keys, values = torch.randn(pool, BLOCK, KV, D, generator=g), torch.randn(pool, BLOCK, KV, D, generator=g)
    for rows, context in [(1, 200), (4, 200), (8, 200), (16, 200), (8, 1000)]:
        q = torch.randn(rows, H, D, generator=g)
        blocks = -(-context // BLOCK)
        tables = torch.stack([torch.randperm(pool, generator=g)[:blocks] for _ in range(rows)])
        lens = torch.full((rows,), context)
        positions = torch.arange(context)

        def gathered():  # what the kernel replaces: each row's blocks copied out, then sdpa over them
            k = keys[tables[:, positions // BLOCK], positions % BLOCK].repeat_interleave(H // KV, dim=2)
            v = values[tables[:, positions // BLOCK], positions % BLOCK].repeat_interleave(H // KV, dim=2)
            return torch.nn.functional.scaled_dot_product_attention(q[:, :, None], k.transpose(1, 2), v.transpose(1, 2))

        ours = mod.paged_decode_attention(q, keys, values, tables, lens, D ** -0.5)
        assert torch.allclose(ours, gathered()[:, :, 0], atol=1e-5), "the kernel disagrees with gather + sdpa"
        out[f"{rows} rows x {context} positions"] = {
            "ours_us": per_call_us(lambda: mod.paged_decode_attention(q, keys, values, tables, lens, D ** -0.5), 200),
            "gather_sdpa_us": per_call_us(gathered, 50)}
    return out


def argmax(mod) -> dict:
    out = {}
    for rows in ROWS:
        logits = torch.randn(rows, LINEARS["lm_head"][0])
        assert torch.equal(mod.argmax_rows(logits), logits.argmax(-1))
        out[f"{rows} rows x {logits.shape[1]}"] = {"ours_us": per_call_us(lambda: mod.argmax_rows(logits), 200),
                                                    "torch_us": per_call_us(lambda: logits.argmax(-1), 200)}
    return out


def main() -> None:
    mod = kernels.load()
    if mod is None:
        raise SystemExit(f"our kernels are not built here: {kernels.why_not()}")
    with open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown")
    result = {"meta": {"cpu": cpu, "flags": kernels.flags(), "threads": torch.get_num_threads(),
                       "load_before": os.getloadavg()[0]},
              "linear": linears(mod), "attention": attention(mod), "argmax": argmax(mod)}
    result["meta"]["load_after"] = os.getloadavg()[0]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
