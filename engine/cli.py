"""Headless CLI: run a workload through the lanes and print what happened; generate a mix; sweep request rates.

    python -m engine run demos/mixed.json [--lanes static,continuous,dynamic | --lanes '[{...}, ...]']
        [--backend model|sim] [--slots N] [--max-wait N] [--model PATH] [--json] [--trace FILE]
    python -m engine generate --n 16 --rate 4 [--burstiness 1] [--seed 0] [--output-tokens 8,16,32] > mix.json
    python -m engine sweep demos/poisson.json --rates 1,2,4,8 [--lanes ...] [--slo-ttft-ms N] [--slo-tpot-ms N]
"""
import argparse
import json
import sys

from .admission import ORDERS
from .policies import POLICIES
from .engine import Engine
from .metrics import run_metrics
from .model import ModelLoadError
from .workload import CLI_LIMITS, WorkloadError, load_workload

LANES_HELP = (f"comma-separated policies from {','.join(POLICIES)}, or a JSON list of lanes such as "
              f"'[\"continuous\", {{\"name\": \"chunked 64\", \"policy\": \"continuous\", \"chunk_size\": 64}}]' "
              f"(default: the workload's \"lanes\", else static,continuous)")


def add_engine_options(p: argparse.ArgumentParser) -> None:
    """Flags every subcommand that runs lanes shares: the backend, the model, the workload's options."""
    p.add_argument("--lanes", help=LANES_HELP)
    p.add_argument("--backend", choices=("model", "sim"), default="model",
                   help="model: the real engine (default); sim: the simulator (no model, modelled step times)")
    p.add_argument("--slots", type=int, help="batch slots per lane (default: the workload's)")
    p.add_argument("--max-wait", type=int, help="dynamic lane, step arrivals: steps before a partial group starts")
    p.add_argument("--max-wait-ms", type=float, help="dynamic lane, arrivals in ms: ms before a partial group starts")
    p.add_argument("--scheduling-policy", "--policy", dest="scheduling_policy", choices=list(ORDERS),
                   help="continuous lane admission order")
    p.add_argument("--chunk-size", type=int, help="continuous lane: prompt tokens per prefill chunk")
    p.add_argument("--max-batch-tokens", type=int, help="continuous lane: tokens computed per step")
    p.add_argument("--kv-budget", type=int, help="KV tokens per lane, in blocks of --kv-block-size")
    p.add_argument("--kv-block-size", type=int, help="tokens per KV block (default 16)")
    p.add_argument("--fused", action="store_true", default=None, help="one fused forward per step")
    p.add_argument("--prefix-cache", action="store_true", default=None,
                   help="continuous lane: reuse the K/V of cached full prompt blocks")
    p.add_argument("--model", help="local Hugging Face model folder or .gguf file (default: SmolLM2-135M)")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu or cuda")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description="Batch Lanes' headless engine.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a workload file through the lanes")
    run.add_argument("workload", help="workload JSON file (see demos/)")
    add_engine_options(run)
    run.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    run.add_argument("--trace", help="write every step record as JSON lines to this file")
    gen = sub.add_parser("generate", help="print a workload whose arrivals follow a Poisson or Gamma process")
    gen.add_argument("--n", type=int, default=16, help="requests (default 16)")
    gen.add_argument("--rate", type=float, default=1.0, help="mean requests per second (default 1)")
    gen.add_argument("--burstiness", type=float, default=1.0,
                     help="Gamma shape: 1 = Poisson (default), < 1 burstier, > 1 more even")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--output-tokens", default="8:32", help="a list 8,16,32 or a range 8:32 (default 8:32)")
    gen.add_argument("--prompt-words", default="8:40", help="a list or a range of prompt words (default 8:40)")
    gen.add_argument("--slots", type=int, default=4)
    gen.add_argument("--lanes", help=LANES_HELP)
    gen.add_argument("--name", default="generated")
    from .sweep import add_sweep_parser
    add_sweep_parser(sub)
    return parser


def parse_lanes_arg(text: str | None) -> list | None:
    """--lanes: comma-separated names, or a JSON list of names and lane objects (checked by parse_workload)."""
    if text is None:
        return None
    if text.lstrip().startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise WorkloadError("lanes", f"--lanes is not a valid JSON list: {e}") from None
    return [name.strip() for name in text.split(",")]


def parse_lengths(text: str, flag: str) -> list[int] | dict:
    try:
        if ":" in text:
            lo, hi = text.split(":")
            return {"min": int(lo), "max": int(hi)}
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise WorkloadError(flag, f"expected a list such as 8,16,32 or a range such as 8:32, got {text!r}") from None


def workload_options(args) -> dict:
    return dict(slots=args.slots, lanes=parse_lanes_arg(args.lanes), max_wait=args.max_wait,
                max_wait_ms=args.max_wait_ms, scheduling_policy=args.scheduling_policy, chunk_size=args.chunk_size,
                max_batch_tokens=args.max_batch_tokens, kv_budget=args.kv_budget,
                kv_block_size=args.kv_block_size, fused=args.fused, prefix_cache=args.prefix_cache)


def make_engine(args, workload) -> Engine:
    """The simulator, or the model loaded and warmed up for `workload`'s widest lane (as the server warms up), so
    that its first steps are not slowed by one-off costs."""
    if args.backend == "sim":
        return Engine(None, CLI_LIMITS)
    from .model import load_model
    from .warmup import warm_up
    lm = load_model(args.model, dtype=args.dtype, device=args.device)
    warm_up(lm, max(lane.config.slots for lane in workload.lanes))
    return Engine(lm, CLI_LIMITS)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "generate":
            return generate(args)
        if args.command == "sweep":
            from .sweep import sweep_main
            return sweep_main(args)
        workload = load_workload(args.workload, CLI_LIMITS, **workload_options(args))
        engine = make_engine(args, workload)
        run = engine.start(engine.prepare(workload))
    except (WorkloadError, ModelLoadError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    run.run_to_end()
    records = run.records()
    metrics = run_metrics(records, run.workload)
    if args.trace:
        with open(args.trace, "w") as f:
            for t in range(max(len(r) for r in records.values())):
                for recs in records.values():
                    if t < len(recs):
                        f.write(json.dumps(recs[t].to_dict()) + "\n")
    if args.json:
        print(json.dumps({"workload": workload.name, "simulated": engine.simulated, "lanes": metrics}, indent=2))
    else:
        print(format_tables(run.workload, metrics, engine))
    return 0


def generate(args) -> int:
    from .workload import parse_workload
    spec = {"n": args.n, "rate": args.rate, "burstiness": args.burstiness, "seed": args.seed,
            "output_tokens": parse_lengths(args.output_tokens, "--output-tokens"),
            "prompt_words": parse_lengths(args.prompt_words, "--prompt-words")}
    obj = {"name": args.name, "description": f"{args.n} requests, {args.rate:g}/s, burstiness {args.burstiness:g}, "
                                             f"seed {args.seed}", "slots": args.slots, "generate": spec}
    if args.lanes:
        obj["lanes"] = parse_lanes_arg(args.lanes)
    workload = parse_workload(obj, CLI_LIMITS)
    print(json.dumps(workload.to_dict(), indent=1))
    return 0


def _f(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def where(engine: Engine) -> str:
    return "SIMULATED (no model; step times from a cost model)" if engine.simulated else \
        f"model {engine.lm.name} on {engine.lm.device.type}, {str(engine.lm.dtype).removeprefix('torch.')}"


def format_tables(workload, metrics: dict, engine: Engine) -> str:
    lines = [f"{workload.name}: {len(workload.requests)} requests, {workload.config.slots} slots, arrivals in "
             f"{'ms' if workload.timed else 'steps'} - {where(engine)}", ""]
    from .metric_table import METRICS, TABLES, cli_heading, format_value  # the columns: the metric table's "cli"
    columns = [(c.metrics[0], c.fmt or METRICS[c.metrics[0]].fmt, max(c.width, len(cli_heading(c))), cli_heading(c))
               for c in TABLES["cli"]]
    width = max(11, *(len(name) for name in metrics))
    head = " ".join([f"{'lane':<{width}}", *(f"{heading:>{w}}" for _, _, w, heading in columns)])
    lines += [head, "-" * len(head)]
    for name, m in metrics.items():
        lines.append(" ".join([f"{name:<{width}}", *(f"{format_value(m.get(key), fmt):>{w}}" for key, fmt, w, _ in columns)]))
    for name, m in metrics.items():
        lines += ["", f"{name}: per request",
                  f"  {'id':<8} {'arr':>4} {'arr ms':>8} {'first':>5} {'fin':>4} {'ret':>4} {'TTFT':>4} {'lat':>4} "
                  f"{'tok':>4} {'TTFT ms':>8} {'stop':<6} text"]
        for rid, q in m["requests"].items():
            text = (q["text"] or "").replace("\n", " ")
            lines.append(f"  {rid:<8} {q['arrival']:>4} {q['arrival_ms']:>8.0f} {_f(q['first_token_step'], 'd'):>5} "
                         f"{_f(q['finish_step'], 'd'):>4} {_f(q['return_step'], 'd'):>4} "
                         f"{_f(q['ttft_steps'], 'd'):>4} {_f(q['latency_steps'], 'd'):>4} {q['tokens']:>4} "
                         f"{_f(q['ttft_ms'], '.0f'):>8} {q['stop'] or '-':<6} {text[:60]!s}")
    return "\n".join(lines)
