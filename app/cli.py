"""The command line of the server: parse flags, configure logging, build the app and serve it.

    python -m app [--host H] [--port P] [--model PATH | --backend sim] [--async-mode MODE] [--dev]
                  [--data DIR] [--limit NAME=N ...] [--live-options JSON]
                  [--message-queue redis://HOST:PORT/DB [--store sqlite|redis]]
                  [--api-key KEY] [--allowed-origins JSON] [--ssl-keyfile F --ssl-certfile F]
                  [--otlp-traces-endpoint URL]

The page is served at once, by gunicorn's threaded worker (app.server; `--dev`: Werkzeug's development server). In
one process (the default) the engine worker loads the model in the background and reports its progress as
`model_status` events and on `GET /healthz`. With `--message-queue` this is a web process of several: engine workers
(`python -m app.engine_worker`) run the model elsewhere. `--limit NAME=N` changes any limit that `GET /api/limits`
lists. Nothing but argparse loads before the command line is read, so the async mode (app.asyncmode) can patch the
standard library before Flask, engine.io or Redis load.
"""
import argparse
import os
import re
import sys

from .asyncmode import HELP, MODES, monkey_patch_if_asked


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
    p.add_argument("--dev", action="store_true",
                   help="Werkzeug's development server instead of gunicorn (threading mode; not for a network)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="gunicorn's threads: open streams, polls and WebSockets each hold one (default 512)")
    p.add_argument("--api-key", default=None, metavar="KEY",
                   help="clients of /v1, /tokenize and /detokenize must send `Authorization: Bearer KEY` "
                        "(default: $VLLM_API_KEY, else $BATCH_LANES_API_KEY, else none); the page's routes are open")
    p.add_argument("--allowed-origins", default=None, metavar="JSON",
                   help='origins whose pages may call /v1 from a browser (CORS), e.g. \'["https://a.example"]\' or \'["*"]\'')
    p.add_argument("--served-model-name", nargs="+", default=[], metavar="NAME",
                   help="the names /v1 answers to and reports (the first), e.g. HuggingFaceTB/SmolLM2-135M-Instruct, "
                        "so tools find the tokenizer by it (default: the model's file or folder name)")
    p.add_argument("--otlp-traces-endpoint", default=None, metavar="URL",
                   help="export an OpenTelemetry span per completion request to this OTLP collector, e.g. "
                        "http://127.0.0.1:4317 (gRPC; $OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf: "
                        "http://HOST:4318/v1/traces) (default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else none)")
    p.add_argument("--ssl-keyfile", default=None, metavar="FILE", help="serve HTTPS: the private key (with --ssl-certfile)")
    p.add_argument("--ssl-certfile", default=None, metavar="FILE", help="serve HTTPS: the certificate (with --ssl-keyfile)")
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
    p.add_argument("--log-json", action="store_true", help="log one JSON object a line (default: text lines)")
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
        config.update(HOST=args.host, PORT=args.port, PUBLIC_URL=args.public_url,
                      API_KEY=args.api_key or os.environ.get("VLLM_API_KEY") or os.environ.get("BATCH_LANES_API_KEY"),
                      ALLOWED_ORIGINS=allowed_origins(args.allowed_origins, parser),
                      SERVED_MODEL_NAMES=tuple(args.served_model_name),
                      OTLP_TRACES_ENDPOINT=tracing_endpoint(args.otlp_traces_endpoint, parser))
        if bool(args.ssl_keyfile) != bool(args.ssl_certfile):
            parser.error("--ssl-keyfile and --ssl-certfile go together")
        if args.threads is not None and args.threads < 4:
            parser.error("--threads: at least 4")
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
    from engine.config import live_pd
    if live_pd(config["LIVE_OPTIONS"]) and config["BACKEND"] == "sim":
        parser.error("--live-options: disaggregation needs the model (a served P/D pair copies real KV blocks), "
                     "not --backend sim")
    return config


def tracing_endpoint(flag: str | None, parser: argparse.ArgumentParser) -> str | None:
    """--otlp-traces-endpoint, else $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (app.web.tracing), checked usable here."""
    from .web.tracing import endpoint, unusable

    url = endpoint(flag)
    if url and (why := unusable()):
        parser.error(f"--otlp-traces-endpoint: {why}")
    return url


def allowed_origins(text: str | None, parser: argparse.ArgumentParser) -> tuple[str, ...]:
    """--allowed-origins as a tuple of origins (vLLM's spelling: a JSON list; a comma-separated list is taken too)."""
    import json

    if not text:
        return ()
    try:
        origins = json.loads(text) if text.lstrip().startswith("[") else [o.strip() for o in text.split(",")]
    except json.JSONDecodeError as e:
        parser.error(f"--allowed-origins: not a JSON list ({e})")
    if not isinstance(origins, list) or not all(isinstance(o, str) and o for o in origins):
        parser.error('--allowed-origins: expected a list of origins, e.g. \'["https://a.example"]\'')
    return tuple(o.rstrip("/") for o in origins)


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

    from .runs.redis_link import QueueUnreachable, connect_redis
    from .server import THREADS, Listen, serve
    from .web.factory import create_app

    config = config_from_args(args, parser)
    from .logs import configure as configure_logs
    configure_logs(args.log_json)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log: our own lines carry sizes and timings
    if args.message_queue:   # before the server starts: an unreachable Redis is a clear error, not a worker that fails
        try:
            connect_redis(args.message_queue).close()
        except QueueUnreachable as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    listen = Listen(args.host, args.port, args.threads or THREADS, args.ssl_certfile, args.ssl_keyfile)
    server = "Werkzeug (--dev)" if args.dev and args.async_mode == "threading" else \
        "eventlet" if args.async_mode == "eventlet" else f"gunicorn, {listen.threads} threads"
    logging.getLogger("batch_lanes").info("serving on %s (%s mode, %s%s)", listen.url, args.async_mode, server,
                                          ", web process over Redis" if args.message_queue else "")
    serve(lambda: create_app(config), listen, args.async_mode, args.dev)
    return 0
