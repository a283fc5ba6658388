"""The command line of the server: parse flags, configure logging, build the app and serve it.

The page is served at once; the engine worker loads the model in the background and reports its
progress as `model_status` events and on `GET /healthz`. `--limit NAME=N` changes any limit that
`GET /api/limits` lists (the workload limits of engine.workload.Limits and the server's own).
"""
import argparse
import logging
from dataclasses import fields, replace

from engine.workload import Limits

from .factory import DEFAULTS, SERVER_LIMITS, create_app, socketio


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m app", description="Batch Lanes: the page and its socket server.")
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=5000)
    p.add_argument("--model", help="local Hugging Face model folder or .gguf file (default: SmolLM2-135M)")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu or cuda")
    p.add_argument("--async-mode", choices=("threading", "eventlet"), default="threading",
                   help="threading (default) or eventlet (forward passes go through eventlet.tpool)")
    p.add_argument("--data", help="folder of the run store (default: $BATCH_LANES_DATA, else data/ in the repo)")
    p.add_argument("--limit", action="append", default=[], metavar="NAME=N",
                   help="change a limit listed by GET /api/limits, e.g. --limit max_requests=16 (repeatable)")
    return p


def config_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict:
    config = {"MODEL": args.model, "DTYPE": args.dtype, "DEVICE": args.device, "ASYNC_MODE": args.async_mode,
              "DATA_DIR": args.data}
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
    config["LIMITS"] = replace(DEFAULTS["LIMITS"], **changes)
    return config


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    config = config_from_args(args, parser)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log: our own lines carry sizes and timings
    app = create_app(config)
    logging.getLogger("batch_lanes").info("serving on http://%s:%d (%s mode)", args.host, args.port, args.async_mode)
    try:
        # The werkzeug server is what threading mode has; it runs without a TTY only when told so.
        socketio.run(app, host=args.host, port=args.port, debug=False, use_reloader=False, log_output=False,
                     **({"allow_unsafe_werkzeug": True} if args.async_mode == "threading" else {}))
    finally:
        app.extensions["worker"].stop()
    return 0
