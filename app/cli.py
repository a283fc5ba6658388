"""The command line of the server: parse flags, configure logging, build the app and serve it.

    python -m app [--host H] [--port P] [--model PATH | --backend sim] [--async-mode MODE]
                  [--data DIR] [--limit NAME=N ...] [--live-options JSON]
                  [--message-queue redis://HOST:PORT/DB [--store sqlite|redis]]

The page is served at once. In one process (the default) the engine worker loads the model in the background
and reports its progress as `model_status` events and on `GET /healthz`. With `--message-queue` this is a web
process of several: engine workers (`python -m app.engine_worker`) run the model elsewhere. `--limit NAME=N`
changes any limit that `GET /api/limits` lists. Nothing but argparse loads before the command line is read,
so the async mode (app.asyncmode) can patch the standard library before Flask, engine.io or Redis load.
"""
import argparse
import re
import sys

from .asyncmode import HELP, MODES, monkey_patch_if_asked, serve_options


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m app", description="Batch Lanes: the page and its socket server.")
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=5000)
    p.add_argument("--public-url", metavar="URL", default=None,
                   help="the address phones open, for QR codes and class links, e.g. http://192.168.1.20:5000 "
                        "(default: $BATCH_LANES_PUBLIC_URL, else the page's own address)")
    add_engine_args(p)
    p.add_argument("--async-mode", choices=MODES, default="threading", help=HELP)
    p.add_argument("--metrics-prefix", default="batch_lanes", metavar="NAME",
                   help="/metrics names are NAME:... (default batch_lanes; vllm: a vLLM dashboard reads them unchanged)")
    p.add_argument("--message-queue", metavar="redis://HOST:PORT/DB",
                   help="a web process of several sharing this Redis; the engine runs in `python -m app.engine_worker`")
    return p


def add_engine_args(p: argparse.ArgumentParser) -> None:
    """The flags a process that may own the model takes (this one, and app.engine_worker)."""
    p.add_argument("--model", help="local Hugging Face model folder or .gguf file (default: SmolLM2-135M)")
    p.add_argument("--backend", choices=("model", "sim"), default="model",
                   help="model (default) or sim: the step-clock simulator, no model (output says SIMULATED)")
    p.add_argument("--pace", type=float, default=0.0, metavar="X",
                   help="with --backend sim: wait X times each simulated step's time (1 = real time; default 0)")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu or cuda")
    p.add_argument("--data", help="folder of the run store (default: $BATCH_LANES_DATA, else data/ in the repo)")
    p.add_argument("--store", choices=("sqlite", "redis"), default="sqlite",
                   help="sqlite (default; one machine) or redis (the message queue's Redis; several machines)")
    p.add_argument("--live-options", metavar="JSON", default="{}",
                   help='how the live lane batches, changes to its defaults, e.g. \'{"max_batch_tokens": 256, '
                        '"chunk_size": null, "fused": false}\' (default: a budget of 256 tokens a step, chunking prompts, fused; docs/live-api.md)')
    p.add_argument("--limit", action="append", default=[], metavar="NAME=N",
                   help="change a limit listed by GET /api/limits, e.g. --limit max_requests=16 (repeatable)")


def config_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict:
    from dataclasses import fields, replace

    from engine.limits import Limits
    from .settings import DEFAULTS, SERVER_LIMITS

    config = {"MODEL": args.model, "BACKEND": args.backend, "PACE": args.pace, "DTYPE": args.dtype, "DEVICE": args.device,
              "ASYNC_MODE": getattr(args, "async_mode", "threading"), "DATA_DIR": args.data, "STORE": args.store,
              "MESSAGE_QUEUE": getattr(args, "message_queue", None),
              "METRICS_PREFIX": getattr(args, "metrics_prefix", "batch_lanes")}
    if "host" in args:  # the server's own command line (not the engine worker's)
        config.update(HOST=args.host, PORT=args.port, PUBLIC_URL=args.public_url)
    workload_limits = {f.name for f in fields(Limits)}
    changes = {}
    for item in args.limit:
        name, _, value = item.partition("=")
        if not value.isdigit():
            parser.error(f"--limit {item}: expected NAME=N with N a whole number")
        if name in workload_limits:
            changes[name] = int(value)
        elif name in SERVER_LIMITS:
            config[SERVER_LIMITS[name]] = int(value)
        else:
            parser.error(f"--limit {item}: unknown limit; known: {', '.join(sorted(workload_limits | set(SERVER_LIMITS)))}")
    if config["STORE"] == "redis" and not config["MESSAGE_QUEUE"] and "message_queue" in args:
        parser.error("--store redis needs --message-queue redis://...")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", config["METRICS_PREFIX"]):
        parser.error(f"--metrics-prefix {config['METRICS_PREFIX']!r}: letters, digits and _ only, not starting with a digit")
    config["LIMITS"] = replace(DEFAULTS["LIMITS"], **changes)
    config["LIVE_OPTIONS"] = live_options(args.live_options, parser)
    return config


def live_options(text: str, parser: argparse.ArgumentParser) -> dict:
    """--live-options JSON as a dict of changes to engine.config.LIVE_OPTIONS, checked by engine.config.live_config
    (torch-free) as the live lane checks them (an error names what is wrong)."""
    import json

    from engine.config import live_config
    try:
        options = json.loads(text)
    except json.JSONDecodeError as e:
        parser.error(f"--live-options: not JSON ({e})")
    if not isinstance(options, dict):
        parser.error("--live-options: expected a JSON object, e.g. {\"max_batch_tokens\": 256}")
    try:
        live_config(1, 1, options)
    except (TypeError, ValueError) as e:
        parser.error(f"--live-options: {e}")
    return options


def main(argv: list[str] | None = None) -> int:
    from engine.threads import configure  # the engine's compute threads, set before anything loads torch
    configure()
    parser = build_parser()
    args = parser.parse_args(argv)
    monkey_patch_if_asked(args.async_mode)  # before anything else imports the standard library's sockets
    import logging

    from .runs.redis_link import QueueUnreachable
    from .web.extensions import socketio
    from .web.factory import create_app

    config = config_from_args(args, parser)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log: our own lines carry sizes and timings
    try:
        app = create_app(config)
    except QueueUnreachable as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    logging.getLogger("batch_lanes").info("serving on http://%s:%d (%s mode%s)", args.host, args.port, args.async_mode,
                                          ", web process over Redis" if args.message_queue else "")
    try:
        socketio.run(app, host=args.host, port=args.port, debug=False, use_reloader=False, log_output=False,
                     **serve_options(args.async_mode))   # idle timeout, no versions in `Server` (app.asyncmode)
    finally:
        if app.extensions["worker"] is not None:
            app.extensions["worker"].stop()
    return 0
