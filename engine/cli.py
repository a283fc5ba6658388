"""Headless CLI: run a workload through the lanes and print what happened.

    python -m engine run demos/mixed.json [--lanes static,continuous,dynamic] [--backend model|sim]
        [--slots N] [--max-wait N] [--model PATH] [--json] [--trace FILE]
"""
import argparse
import json
import sys

from .config import LANES, POLICIES
from .engine import Engine
from .metrics import run_metrics
from .model import ModelLoadError
from .workload import CLI_LIMITS, WorkloadError, check_lanes, load_workload


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description="Batch Lanes' headless engine.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a workload file through the lanes")
    run.add_argument("workload", help="workload JSON file (see demos/)")
    run.add_argument("--lanes", help=f"comma-separated, from {','.join(LANES)} (default: the workload's "
                                      f"\"lanes\", else static,continuous)")
    run.add_argument("--backend", choices=("model", "sim"), default="model",
                     help="model: the real engine (default); sim: step-clock simulator, no model")
    run.add_argument("--slots", type=int, help="batch slots per lane (default: the workload's)")
    run.add_argument("--max-wait", type=int, help="dynamic lane: steps before a partial group starts")
    run.add_argument("--policy", choices=POLICIES, help="continuous lane admission order")
    run.add_argument("--chunk-size", type=int, help="continuous lane: prompt tokens per prefill chunk")
    run.add_argument("--max-batch-tokens", type=int, help="continuous lane: tokens computed per step")
    run.add_argument("--kv-budget", type=int, help="KV tokens per lane, in blocks of --kv-block-size")
    run.add_argument("--kv-block-size", type=int, help="tokens per KV block (default 16)")
    run.add_argument("--fused", action="store_true", default=None, help="one fused forward per step")
    run.add_argument("--model", help="local Hugging Face model folder or .gguf file (default: SmolLM2-135M)")
    run.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    run.add_argument("--device", default="auto", help="auto (CUDA when available), cpu or cuda")
    run.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    run.add_argument("--trace", help="write every step record as JSON lines to this file")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        workload = load_workload(args.workload, CLI_LIMITS, slots=args.slots, max_wait=args.max_wait,
                                 policy=args.policy, chunk_size=args.chunk_size,
                                 max_batch_tokens=args.max_batch_tokens, kv_budget=args.kv_budget,
                                 kv_block_size=args.kv_block_size, fused=args.fused)
        if args.backend == "sim":
            engine = Engine(None, CLI_LIMITS)
        else:
            from .model import load_model
            engine = Engine(load_model(args.model, dtype=args.dtype, device=args.device), CLI_LIMITS)
        lanes = check_lanes([n.strip() for n in args.lanes.split(",")], CLI_LIMITS) if args.lanes else list(workload.lanes)
        run = engine.start(engine.prepare(workload), lanes)
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
        print(format_tables(workload, metrics, engine))
    return 0


def _f(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def format_tables(workload, metrics: dict, engine: Engine) -> str:
    where = "SIMULATED (step clock only, no model)" if engine.simulated else \
        f"model {engine.lm.name} on {engine.lm.device.type}, {str(engine.lm.dtype).removeprefix('torch.')}"
    lines = [f"{workload.name}: {len(workload.requests)} requests, {workload.config.slots} slots - {where}", ""]
    head = f"{'lane':<11} {'steps':>5} {'tokens':>6} {'tok/step':>8} {'slot use':>8} {'TTFT st':>8} " \
           f"{'lat st':>7} {'pad':>4} {'evict':>5} {'wall s':>7} {'tok/s':>7} {'TTFT ms':>8} {'TPOT ms':>8}"
    lines += [head, "-" * len(head)]
    for name, m in metrics.items():
        lines.append(f"{name:<11} {m['steps']:>5} {m['tokens']:>6} {m['tokens_per_step']:>8.2f} "
                     f"{m['slot_use']:>8.0%} {_f(m['mean_ttft_steps'], '.3f'):>8} "
                     f"{_f(m['mean_latency_steps'], '.2f'):>7} {m['padding_slot_steps']:>4} {m['preemptions']:>5} "
                     f"{_f(m['wall_s'], '.2f'):>7} {_f(m['tokens_per_s'], '.1f'):>7} "
                     f"{_f(m['mean_ttft_ms'], '.0f'):>8} {_f(m['mean_tpot_ms'], '.0f'):>8}")
    for name, m in metrics.items():
        lines += ["", f"{name}: per request",
                  f"  {'id':<8} {'arr':>4} {'first':>5} {'fin':>4} {'ret':>4} {'TTFT':>4} {'lat':>4} {'tok':>4} "
                  f"{'stop':<6} text"]
        for rid, q in m["requests"].items():
            text = (q["text"] or "").replace("\n", " ")
            lines.append(f"  {rid:<8} {q['arrival']:>4} {_f(q['first_token_step'], 'd'):>5} "
                         f"{_f(q['finish_step'], 'd'):>4} {_f(q['return_step'], 'd'):>4} "
                         f"{_f(q['ttft_steps'], 'd'):>4} {_f(q['latency_steps'], 'd'):>4} {q['tokens']:>4} "
                         f"{q['stop'] or '-':<6} {text[:60]!s}")
    return "\n".join(lines)
