"""The command line of the server: parse flags, configure logging, build the app and serve it.

The page is served at once; the engine worker loads the model in the background and reports its
progress as `model_status` events and on `GET /healthz`.
"""
import argparse
import logging

from .factory import create_app, socketio


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m app", description="Batch Lanes: the page and its socket server.")
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=5000)
    p.add_argument("--model", help="local Hugging Face model folder or .gguf file (default: SmolLM2-135M)")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu or cuda")
    p.add_argument("--async-mode", choices=("threading", "eventlet"), default="threading",
                   help="threading (default) or eventlet (forward passes go through eventlet.tpool)")
    p.add_argument("--data", help="folder of the run store (default: $BATCH_LANES_DATA or ./data)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log: our own lines carry sizes and timings
    app = create_app({"MODEL": args.model, "DTYPE": args.dtype, "DEVICE": args.device,
                      "ASYNC_MODE": args.async_mode, "DATA_DIR": args.data})
    logging.getLogger("batch_lanes").info("serving on http://%s:%d (%s mode)", args.host, args.port, args.async_mode)
    try:
        # The werkzeug server is what threading mode has; it runs without a TTY only when told so.
        socketio.run(app, host=args.host, port=args.port, debug=False, use_reloader=False, log_output=False,
                     **({"allow_unsafe_werkzeug": True} if args.async_mode == "threading" else {}))
    finally:
        app.extensions["worker"].stop()
    return 0
