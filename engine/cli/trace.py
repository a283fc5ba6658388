"""`python -m engine trace FILE --window START:END --time-scale X --length-scale Y [--limit N] [--seed S]`: print
the workload a slice of a production trace makes (engine/workload/trace.py), as `generate` prints a drawn mix.

    python -m engine trace demos/traces/azure-code-burst.csv --window 0:60 --time-scale 1 --length-scale 0.0625 \
        --lanes static,continuous > burst.json && python -m engine run burst.json --backend sim

It only parses and prints: the slice, the scales and the checks are trace.py's and workload.py's.
"""
import argparse
import json


def add_trace_parser(sub, lanes_help: str) -> None:
    p = sub.add_parser("trace", help="print a workload replaying a slice of an Azure 2023 or Mooncake trace")
    p.add_argument("file", help="an Azure 2023 .csv or a Mooncake .jsonl trace (slices ship in demos/traces/)")
    p.add_argument("--window", required=True, help="START:END, seconds after the trace's first request")
    p.add_argument("--time-scale", type=float, required=True,
                   help="every arrival gap times this: 0.5 arrives twice as fast, order and burstiness kept")
    p.add_argument("--length-scale", type=float, required=True,
                   help="prompt tokens times this (Mooncake: 512 x this tokens a block, a whole number from 32)")
    p.add_argument("--output-scale", type=float, help="output tokens times this (default: --length-scale)")
    p.add_argument("--limit", type=int, help="at most this many requests, the first of the window")
    p.add_argument("--seed", type=int, default=0, help="the prompts' words (default 0)")
    p.add_argument("--slots", type=int, default=4)
    p.add_argument("--lanes", help=lanes_help)
    p.add_argument("--name", help="the workload's name (default: the file's)")


def trace_command(args, limits, parse_lanes_arg, parse_workload) -> int:
    from engine.workload.trace import check_spec, read_trace, trace_workload
    spec = {"file": args.file, "window": args.window, "time_scale": args.time_scale, "length_scale": args.length_scale,
            "seed": args.seed, **({"output_scale": args.output_scale} if args.output_scale is not None else {}),
            **({"limit": args.limit} if args.limit is not None else {})}
    spec = check_spec(spec)
    obj = {**trace_workload(read_trace(args.file), spec, limits), "slots": args.slots}
    if args.name:
        obj["name"] = args.name
    if args.lanes:
        obj["lanes"] = parse_lanes_arg(args.lanes)
    print(json.dumps(parse_workload(obj, limits).to_dict(), indent=1))
    return 0
