"""The live lane's batching options side by side, in one run (a benchmark, not a test: it asserts nothing).

    .venv/bin/python scripts/live_bench.py [--rate 4] [--requests 24] [--max-tokens 32]

For each option set it starts `python -m app --live-options JSON` on the real model and drives it with
scripts/serve_bench.py at a Poisson rate, then prints output tok/s, TTFT p50 and TPOT p50 of each beside the
first (the old default: whole prompts in their own prefill call, decodes in another) and the load average.
"""
import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.serve_bench import serve_bench  # noqa: E402

VARIANTS = {  # name -> --live-options (engine.config.LIVE_OPTIONS changed)
    "old: whole prompts, split calls": {"max_batch_tokens": None, "chunk_size": None, "fused": False},
    "budget 128, chunk 64, fused": {"max_batch_tokens": 128, "chunk_size": 64},
    "budget 64, chunk 32, fused": {"max_batch_tokens": 64, "chunk_size": 32},
    "default: budget 256, no chunk cap, fused": {},
}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=4.0)
    p.add_argument("--requests", type=int, default=24)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--only", nargs="*", type=int, help="indexes of VARIANTS to run (default all)")
    args = p.parse_args(argv)
    rows = []
    for i, (name, options) in enumerate(VARIANTS.items()):
        if args.only and i not in args.only:
            continue
        result = serve_bench(rates=[args.rate], requests=args.requests, max_tokens=args.max_tokens,
                             server_args=["--live-options", json.dumps(options)])
        point = result["points"][0]
        rows.append((name, point["output_throughput"], point["median_ttft_ms"], point["median_tpot_ms"],
                     result["meta"]["load_avg_before"]))
        print(f"  {name}: done", file=sys.stderr)
    print(f"Poisson {args.rate:g} req/s, {args.requests} requests x {args.max_tokens} tokens, "
          f"{os.cpu_count()} CPUs, load average now {os.getloadavg()[0]:.2f}")
    print(f"{'live options':<42} {'tok/s':>7} {'TTFT p50':>9} {'TPOT p50':>9} {'÷ first':>16} {'load':>5}")
    base = rows[0]
    for name, tps, ttft, tpot, load in rows:
        ratio = f"{ttft / base[2]:.2f} / {tpot / base[3]:.2f}" if ttft and tpot else "-"
        print(f"{name:<42} {tps:>7.1f} {ttft or 0:>7.0f}ms {tpot or 0:>7.0f}ms {ratio:>16} {load:>5.2f}")


if __name__ == "__main__":
    main()
