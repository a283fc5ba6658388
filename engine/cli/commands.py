"""Headless CLI: run a workload through the lanes and print what happened; generate a mix; sweep request rates.

    python -m engine run demos/mixed.json [--lanes static,continuous,dynamic | --lanes '[{...}, ...]']
        [--backend model|sim] [--slots N] [--max-wait N] [--model PATH] [--json] [--trace FILE]
        [--slo-ttft-ms N] [--slo-tpot-ms N]   # the SLO good/s counts (default: the workload's "slo")
    python -m engine generate --n 16 --rate 4 [--burstiness 1] [--seed 0] [--output-tokens 8,16,32] > mix.json
    python -m engine sweep demos/poisson.json --rates 1,2,4,8 [--lanes ...] [--slo-ttft-ms N] [--slo-tpot-ms N]
    python -m engine trace FILE --window START:END --time-scale X --length-scale Y [--limit N] [--seed S] > mix.json
    python -m engine model-folder [--model PATH]    # the folder whose tokenizer aiperf, guidellm, lm-eval can load

`run` and `sweep` take the same lane and backend flags from one parser (`LANE_OPTIONS`, `BACKEND_OPTIONS`) and
turn them into the workload's options in one place (`workload_options`). The sweep's library (re-timing,
serving metrics) is `sweep.py`; this module only parses, prints and exits. It does not know what a flag does
inside a lane (the workload and the scheduler do) and computes no number itself (`metrics.py` does).
"""
import argparse
import json
import sys
from dataclasses import replace

from engine.admission import ORDERS
from engine.sched.policies import POLICIES
from engine.engine import Engine
from engine.report.metric_table import format_value, text_columns
from engine.report.metrics import run_metrics
from engine.worker.model import ModelLoadError
from engine.cli.trace import add_trace_parser, trace_command
from engine.report.sweep import at_rate, check_rates, format_sweep, run_sweep
from engine.workload.slo import meets_slo, parse_slo, slo_misses, slo_words
from engine.workload.workload import CLI_LIMITS, WorkloadError, load_workload, parse_workload, read_json

LANES_HELP = (f"comma-separated policies from {','.join(POLICIES)}, or a JSON list of lanes such as "
              f"'[\"continuous\", {{\"name\": \"chunked 64\", \"policy\": \"continuous\", \"chunk_size\": 64}}]' "
              f"(default: the workload's \"lanes\", else static,continuous)")


def lane_options() -> argparse.ArgumentParser:
    """The flags that set the workload's options (every lane's defaults, or its lanes): each flag's dest is a
    `parse_workload` override of the same name, so a flag added here reaches run and sweep alike."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--lanes", help=LANES_HELP)
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
    return p


def backend_options() -> argparse.ArgumentParser:
    """The flags that choose the engine (`make_engine`): the simulator, or which model on which device."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--backend", choices=("model", "sim"), default="model",
                   help="model: the real engine (default); sim: the simulator (no model, modelled step times)")
    p.add_argument("--model", help="local Hugging Face model folder or .gguf file (default: SmolLM2-135M)")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu or cuda")
    return p


LANE_OPTIONS = lane_options()
BACKEND_OPTIONS = backend_options()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description="Batch Lanes' headless engine.")
    sub = parser.add_subparsers(dest="command", required=True)
    engine_flags = [LANE_OPTIONS, BACKEND_OPTIONS]
    run = sub.add_parser("run", parents=engine_flags, help="run a workload file through the lanes")
    run.add_argument("workload", help="workload JSON file (see demos/)")
    run.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    run.add_argument("--trace", help="write every step record as JSON lines to this file")
    run.add_argument("--slo-ttft-ms", type=float, help="the SLO's TTFT target in ms (default: the workload's \"slo\")")
    run.add_argument("--slo-tpot-ms", type=float, help="the SLO's TPOT target in ms (default: the workload's)")
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
    sweep = sub.add_parser("sweep", parents=engine_flags,
                           help="re-run a mix at several request rates on every lane (vllm bench serve's numbers)")
    sweep.add_argument("workload", help="workload JSON file: a `generate` section, or requests to re-time at each rate")
    sweep.add_argument("--rates", required=True, help="comma-separated requests per second, e.g. 1,2,4,8")
    sweep.add_argument("--burstiness", type=float,
                       help="Gamma shape of the arrivals: 1 = Poisson (default), < 1 burstier")
    sweep.add_argument("--slo-ttft-ms", type=float, help="goodput: a request is good if its TTFT is at most this")
    sweep.add_argument("--slo-tpot-ms", type=float, help="goodput: ... and its TPOT at most this")
    sweep.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    add_trace_parser(sub, LANES_HELP)
    folder = sub.add_parser("model-folder", help="print the Hugging Face folder (config, tokenizer) of the model the "
                                                 "server runs, for tools that load a tokenizer from a folder")
    folder.add_argument("--model", help="local Hugging Face model folder or .gguf file (default: SmolLM2-135M)")
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
    """The `parse_workload` overrides the lane flags give (None: not given, the workload's own)."""
    options = {a.dest: getattr(args, a.dest) for a in LANE_OPTIONS._actions if a.dest != "help"}
    options["lanes"] = parse_lanes_arg(options["lanes"])
    return options


def with_slo(workload, args):
    """The workload with the SLO targets --slo-ttft-ms and --slo-tpot-ms give in place of its own."""
    given = {"ttft_ms": args.slo_ttft_ms, "tpot_ms": args.slo_tpot_ms}
    if all(v is None for v in given.values()):
        return workload
    own = workload.slo.to_dict() if workload.slo else {}
    return replace(workload, slo=parse_slo({**own, **{k: v for k, v in given.items() if v is not None}}))


def make_engine(args, workload) -> Engine:
    """The simulator, or the model loaded and warmed up for `workload`'s widest lane (as the server warms up), so
    that its first steps are not slowed by one-off costs."""
    if args.backend == "sim":
        return Engine(None, CLI_LIMITS)
    from engine.worker.model import load_model
    from engine.warmup import warm_up
    lm = load_model(args.model, dtype=args.dtype, device=args.device)
    warm_up(lm, max(lane.config.slots for lane in workload.lanes))
    return Engine(lm, CLI_LIMITS)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "generate":
            return generate(args)
        if args.command == "sweep":
            return sweep(args)
        if args.command == "trace":
            return trace_command(args, CLI_LIMITS, parse_lanes_arg, parse_workload)
        if args.command == "model-folder":
            from engine.worker.model import model_folder
            print(model_folder(args.model))
            return 0
        workload = with_slo(load_workload(args.workload, CLI_LIMITS, **workload_options(args)), args)
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


def where(engine: Engine) -> str:
    return "SIMULATED (no model; step times from a cost model)" if engine.simulated else \
        f"model {engine.lm.name} on {engine.lm.device.type}, {str(engine.lm.dtype).removeprefix('torch.')}"


def format_tables(workload, metrics: dict, engine: Engine) -> str:
    lines = [f"{workload.name}: {len(workload.requests)} requests, {workload.config.slots} slots, arrivals in "
             f"{'ms' if workload.timed else 'steps'} - {where(engine)}", ""]
    columns = text_columns("cli")  # the metric table's "cli" table
    width = max(11, *(len(name) for name in metrics))
    head = " ".join([f"{'lane':<{width}}", *(f"{heading:>{w}}" for _, _, w, heading in columns)])
    lines += [head, "-" * len(head)]
    for name, m in metrics.items():
        lines.append(" ".join([f"{name:<{width}}",
                               *(f"{format_value(m.get(key), fmt):>{w}}" for key, fmt, w, _ in columns)]))
    slo = workload.slo
    if slo is not None:  # the SLO the good/s column counts, and what each lane met
        lines += ["", f"SLO: {slo_words(slo)} - met " + ", ".join(
            f"{name} {m['slo_met']}/{sum(q['return_step'] is not None for q in m['requests'].values())}"
            for name, m in metrics.items())]
    lines += fleet_lines(metrics)
    f = format_value
    for name, m in metrics.items():
        lines += ["", f"{name}: per request",
                  f"  {'id':<8} {'arr':>4} {'arr ms':>8} {'first':>5} {'fin':>4} {'ret':>4} {'TTFT':>4} {'lat':>4} "
                  f"{'tok':>4} {'TTFT ms':>8} {'TPOT ms':>8} {'stop':<6} {'SLO' if slo else '':<9} text"]
        for rid, q in m["requests"].items():
            text = (q["text"] or "").replace("\n", " ")
            verdict = "" if slo is None or q["return_step"] is None else "met" if meets_slo(q, slo) else \
                "missed " + "+".join(slo_misses(q, slo))
            lines.append(f"  {rid:<8} {q['arrival']:>4} {q['arrival_ms']:>8.0f} {f(q['first_token_step'], 'd'):>5} "
                         f"{f(q['finish_step'], 'd'):>4} {f(q['return_step'], 'd'):>4} "
                         f"{f(q['ttft_steps'], 'd'):>4} {f(q['latency_steps'], 'd'):>4} {q['tokens']:>4} "
                         f"{f(q['ttft_ms'], '.0f'):>8} {f(q['tpot_ms'], '.0f'):>8} {q['stop'] or '-':<6} {verdict:<9} "
                         f"{text[:60]!s}")
    return "\n".join(lines)


def fleet_lines(metrics: dict) -> list[str]:
    """What a fleet adds (docs/fleets.md), one block per fleet: the load imbalance, the prefix hits on offer and taken,
    and each replica's requests, mean TTFT and most requests held at once (its load over time's peak)."""
    lines = []
    pct = lambda v: format_value(v, ".0%")  # noqa: E731
    for name, m in metrics.items():
        if not m.get("replicas"):
            continue
        lines += ["", f"fleet {name}: load imbalance mean {format_value(m['mean_load_imbalance'], '.2f')} / max "
                      f"{format_value(m['max_load_imbalance'], 'd')}; prefix hits available "
                      f"{pct(m['prefix_hit_rate_available'])} / achieved {pct(m['prefix_hit_rate_achieved'])}"]
        for i, r in enumerate(m["replicas"]):
            peak = max((n for _, n in r["load"]), default=0)
            lines.append(f"  {r['name'] or f'{name}/{i}'}: {len(r['requests'])} requests, {r.get('steps', 0)} steps, "
                         f"mean TTFT {format_value(r.get('mean_ttft_ms'), '.0f')} ms, load at most {peak}")
    return lines


def sweep(args) -> int:
    """Run the workload at every rate of --rates with the same workload options a `run` takes."""
    try:
        rates = check_rates([float(r) for r in args.rates.split(",")])
    except ValueError:
        raise WorkloadError("rates", f"--rates takes numbers such as 1,2,4,8, got {args.rates!r}") from None
    obj = read_json(args.workload)
    if not isinstance(obj, dict):
        raise WorkloadError("workload", "must be a JSON object")
    options = workload_options(args)
    engine = make_engine(args, parse_workload(at_rate(obj, rates[0], args.burstiness), CLI_LIMITS, **options))
    done: list = []

    def progress(point, run):
        done.append(point)
        print(f"[sweep] {point['rate']:g}/s done ({len(done)}/{len(rates)})", file=sys.stderr, flush=True)

    result = run_sweep(engine, obj, rates, CLI_LIMITS, burstiness=args.burstiness, slo_ttft_ms=args.slo_ttft_ms,
                       slo_tpot_ms=args.slo_tpot_ms, on_point=progress, options=options)
    result["simulated"] = engine.simulated
    print(json.dumps(result, indent=1) if args.json else format_sweep(result, where(engine)))
    return 0
