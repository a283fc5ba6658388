"""Every config key of the server with its default, the server's own limits by their public names, and the
repository root: what the command line, the web wing and the engine worker process all read.

This module knows the limits and nothing else (no Flask, no Redis, no torch), so any process may import it.
"""
from pathlib import Path

from engine.limits import Limits

ROOT = Path(__file__).resolve().parent.parent

DEFAULTS = {
    "LIMITS": Limits(),             # every workload limit (engine.limits.Limits)
    "MAX_MESSAGE_BYTES": 256 * 1024,  # largest socket message accepted (max_http_buffer_size); a bigger one drops the connection
    "MAX_QUEUED_RUNS": 32,          # runs waiting for the engine (the running one not counted); more get "busy, try again"
    "SUBMITS_PER_MINUTE": 10,       # submits one client may send per sliding minute
    "WATCHES_PER_MINUTE": 60,       # watches (and cancels) one client may send per sliding minute
    "MAX_SWEEP_RATES": 8,           # request rates one load sweep may run (each rate is a run of every lane)
    "CANCEL_GRACE_S": 5.0,          # a run nobody watches is cancelled after this many seconds (a reload can rejoin)
    "RECENT_RUNS": 100,             # finished, failed and cancelled runs kept in memory for `watch` (one process)
    "MODEL": None,                  # model path for the engine worker to load (None: the default SmolLM2)
    "BACKEND": "model",             # "model", or "sim": the simulator, no model (output says SIMULATED)
    "PACE": 0.0,                    # with the simulator: sleep this many times each simulated step's ms (1: real time)
    "DTYPE": "float32",
    "DEVICE": "auto",
    "DATA_DIR": None,               # folder of runs.sqlite3 (None: $BATCH_LANES_DATA, else data/ in the repo)
    "STORE": "sqlite",              # "sqlite" (one machine) or "redis" (the message queue's Redis, across machines)
    "ASYNC_MODE": "threading",      # one of app.asyncmode.MODES (the other one patches the standard library first)
    "LIVE_SLOTS": 16,               # slots of the live lane the OpenAI API's requests share (one process only;
                                    # at 4 req/s, 8 slots queued requests: TTFT p95 1.3-1.7 s, 16: 0.31 s)
    "LIVE_OPTIONS": {},             # changes to how the live lane batches (engine.config.LIVE_OPTIONS; --live-options)
    "LIVE_MAX_WAITING": 64,         # live requests that may wait for a slot; more get 429
    "MESSAGE_QUEUE": None,          # redis://HOST:PORT/DB: a web process of several; engine workers run elsewhere
    "METRICS_PREFIX": "batch_lanes",  # /metrics names are PREFIX:name (`vllm` for a vLLM dashboard unchanged)
    "HOST": "127.0.0.1",            # the interface the server listens on (what a QR code falls back to)
    "PORT": 5000,
    "SERVED_MODEL_NAMES": (),       # the names /v1 answers to and reports (the first); () the model's own id
    "STARTED_AT": None,             # when create_app ran (Unix seconds): /v1/models' `created`
    "API_KEY": None,                # clients of /v1, /tokenize, /detokenize send `Authorization: Bearer KEY` (None: open)
    "OTLP_TRACES_ENDPOINT": None,   # where completion requests' OpenTelemetry spans go (app.web.tracing); None: no tracing
    "ALLOWED_ORIGINS": (),          # origins whose pages may call /v1 from a browser (CORS; "*": any); () none
    "PUBLIC_URL": None,             # the address phones open (QR codes, class links); None: $BATCH_LANES_PUBLIC_URL, else own names
    "MAX_CLASS_QUEUED": 8,          # queued student runs one class may hold (the teacher's never count)
    "MAX_CLASS_STUDENTS": 200,      # students one class may hold
    "MAX_CLASSES": 50,              # classes open at once on one web process
    "PAUSE_CAP_S": 120.0,           # a run its class's teacher paused goes on by itself after this long
    "CLASS_GRACE_S": 60.0,          # a class whose teacher's page is gone this long ends (a reload rejoins)
}
# The server's own limits, by the name `GET /api/limits` and `--limit NAME=N` give them -> their config key.
SERVER_LIMITS = {"max_message_bytes": "MAX_MESSAGE_BYTES", "max_queued_runs": "MAX_QUEUED_RUNS",
                 "submits_per_minute": "SUBMITS_PER_MINUTE", "watches_per_minute": "WATCHES_PER_MINUTE",
                 "max_sweep_rates": "MAX_SWEEP_RATES", "live_slots": "LIVE_SLOTS",
                 "live_max_waiting": "LIVE_MAX_WAITING", "max_class_queued": "MAX_CLASS_QUEUED",
                 "max_class_students": "MAX_CLASS_STUDENTS"}
