"""An engine worker process: `python -m app.engine_worker --message-queue redis://HOST:PORT/DB [--model PATH |
--backend sim] [--device cuda] [--data DIR] [--store sqlite|redis] [--limit NAME=N ...]`.

It owns one model on one device, takes runs from the Redis run queue that the web processes (`python -m app
--message-queue ...`) fill, and emits every event to the run's room through Redis, where each web process
delivers it to its own sockets. Several workers (one per device or machine) share the queue. Beside the
loop, two threads: a heartbeat (every 2 s; a worker that stops beating for 10 s is dead and its running run
ends with `run_error`) and the answers to token-count questions from the page's editor. Its live lane serves
the web processes' OpenAI endpoint through Redis (app.runs.live_link, two threads more: its beat and its inbox). Give every process of
a deployment the same `--limit` flags and the same store. This module is wiring (the second kind of process,
beside `python -m app`); the loop is app.runs.worker.
"""
import argparse
import logging
import os
import signal
import socket
import sys
import threading

import redis
import socketio

from .cli import add_engine_args, config_from_args
from .live.gateway import LiveGateway
from .live.prom import LiveMetrics
from .live.stats import STATS_EVERY_S, StatsLine
from .live.remote import BEAT_S
from .protocol import Send
from .runs.fanout import deliver
from .runs.live_link import LiveLink
from .runs.redis_book import HEARTBEAT_S
from .runs.redis_link import CHANNEL, QueueUnreachable, connect_redis, every
from .runs.store import open_store
from .runs.tokens import count_prompt_tokens
from .runs.worker_book import WorkerBook
from .settings import DEFAULTS, ROOT

log = logging.getLogger("batch_lanes.engine_worker")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m app.engine_worker",
                                description="Batch Lanes engine worker: runs queued runs from Redis on one model.")
    p.add_argument("--message-queue", required=True, metavar="redis://HOST:PORT/DB", help="the deployment's Redis")
    add_engine_args(p)
    return p


def _every(seconds: float, chore, stop: threading.Event, what: str) -> threading.Thread:
    """`redis_link.every` on a thread of its own until `stop` (a failed call waits a second more: no spinning)."""
    thread = threading.Thread(target=every, args=(seconds, chore, stop.wait, what, stop.is_set, 1.0), name=what,
                              daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int:
    from engine.threads import configure  # the engine's compute threads, set before anything loads torch
    configure()
    from engine import Engine
    from .runs.worker import EngineWorker

    parser = build_parser()
    args = parser.parse_args(argv)
    config = {**DEFAULTS, **config_from_args(args, parser)}
    config["DATA_DIR"] = config["DATA_DIR"] or os.environ.get("BATCH_LANES_DATA") or ROOT / "data"
    from .logs import configure as configure_logs
    configure_logs(args.log_json)
    url = config["MESSAGE_QUEUE"]
    try:
        client = connect_redis(url)
        store = open_store(config, url)
    except QueueUnreachable as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    me = f"worker-{socket.gethostname()}-{os.getpid()}"
    stop = threading.Event()
    book = WorkerBook(client, me, config["MAX_QUEUED_RUNS"], config["CANCEL_GRACE_S"], stopped=stop.is_set)
    emitter = socketio.RedisManager(url, channel=CHANNEL, write_only=True)
    engine = Engine(None, config["LIMITS"]) if config["BACKEND"] == "sim" else None
    worker = EngineWorker(book, lambda sends: deliver(emitter, sends), store, config, engine)

    metrics = LiveMetrics(config["METRICS_PREFIX"], config["LIMITS"].max_prompt_tokens + config["LIMITS"].max_new_tokens,
                          engine=me)   # the `engine` label: this replica
    live = LiveGateway(worker.live, config["LIVE_MAX_WAITING"], metrics)   # the web processes' /metrics sum them
    worker.on_live_step = lambda record: [Send(s.event, {**s.payload, "worker": me}, s.to) for s in live.after_step(record)]
    link = LiveLink(client, me, worker.live, live)

    _every(HEARTBEAT_S, lambda: book.beat_worker(worker.status), stop, "heartbeat")
    _every(BEAT_S, link.beat, stop, "live beat")
    _every(STATS_EVERY_S, StatsLine(metrics).tick, stop, "stats line")
    _every(0.0, link.serve_one, stop, "live link")
    _every(0.0, lambda: book.serve_token_counts(lambda prompts: count_prompt_tokens(worker.engine, prompts))
           if worker.ready else stop.wait(0.5), stop, "token counts")
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log.info("engine worker %s on the run queue at %s (%s)", me, url,
             "simulator" if engine is not None else config["MODEL"] or "default model")
    worker.start()
    while not stop.wait(0.5):
        if not worker._task.is_alive():
            return 1  # the model could not be loaded: said on /healthz and in this log
    worker.stop()
    try:  # leave at once rather than when the heartbeat lapses
        client.srem("batch-lanes:workers", me)
        link.leave()
        client.delete(f"batch-lanes:worker:{me}")
    except redis.RedisError as e:
        log.warning("Redis unreachable at exit (the heartbeat lapses by itself): %s", e)
    log.info("engine worker %s stopped", me)
    return 0


if __name__ == "__main__":
    sys.exit(main())
