"""The run store: finished runs (workload, lanes, step records, metrics) in one SQLite file.

A shared link `/runs/<id>` replays from here after a restart. Every call opens its own connection
(the worker writes, HTTP and socket handlers read; SQLite serializes them), and every failure comes
out as a `StoreError` with one line saying what went wrong: the caller reports it, never drops it.
`RedisRunStore` keeps the same runs in Redis when web processes and engine workers run on several machines;
`open_store` picks one from the config.
This module knows JSON, SQL and a Redis client, nothing of the engine or of sockets.
"""
import json
import shutil
import sqlite3
import tempfile
import time
import zlib
from contextlib import closing
from pathlib import Path

import redis

from .redis_link import connect_redis

SCHEMA = """CREATE TABLE IF NOT EXISTS runs (
    run_id   TEXT PRIMARY KEY,
    created  REAL NOT NULL,   -- wall-clock seconds when the run was submitted
    model    TEXT NOT NULL,
    workload TEXT NOT NULL,   -- JSON: the checked workload
    lanes    TEXT NOT NULL,   -- JSON: ["static", "continuous", ...]
    records  TEXT NOT NULL,   -- JSON: {lane: [step record, ...]}
    metrics  TEXT NOT NULL    -- JSON: {lane: metrics}, as sent in run_finished
)"""


MIN_FREE_MB = 64   # less free space than this under the store's folder and it is reported as failing
CHECK_S = 60       # how often `health` writes a probe file again (free space is read at every call)


class StoreError(Exception):
    """The store could not save or read a run; the message is one line a person can act on."""


class RunStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    _probed: tuple[float, str | None] | None = None   # (monotonic time, the write probe's error) of the last probe

    def health(self) -> dict:
        """Whether a run saved now would be stored: the folder writable (probed every CHECK_S), the database open
        for writing, MIN_FREE_MB free. At start (app.web.factory) and on /healthz."""
        if self._probed is None or time.monotonic() - self._probed[0] > CHECK_S:
            self._probed = (time.monotonic(), self._probe())
        error, free_mb = self._probed[1], None
        if error is None:
            free_mb = shutil.disk_usage(self.path.parent).free // 2 ** 20
            if free_mb < MIN_FREE_MB:
                error = f"only {free_mb} MB free under {self.path.parent} (runs need at least {MIN_FREE_MB} MB)"
        return {"kind": "sqlite", "path": str(self.path), "ok": error is None, "free_mb": free_mb, "error": error}

    def _probe(self) -> str | None:
        try:
            with tempfile.TemporaryFile(dir=self.path.parent if self.path.parent.is_dir() else None) as f:
                f.write(b"probe")
                f.flush()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with closing(sqlite3.connect(self.path, timeout=0.2)) as conn:  # never waits long for a saving worker
                conn.execute(SCHEMA)
                conn.execute("BEGIN IMMEDIATE")   # takes the write lock: fails on a read-only file or folder
                conn.rollback()
        except sqlite3.OperationalError as e:
            if "locked" in str(e):
                return None                   # someone holds the write lock: it is writable
            return f"runs cannot be saved to {self.path}: {type(e).__name__}: {e}"
        except (OSError, sqlite3.Error) as e:
            return f"runs cannot be saved to {self.path}: {type(e).__name__}: {e}"
        return None

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=10)
        conn.execute(SCHEMA)
        return conn

    def save(self, run_id: str, model: str, workload: dict, lanes: list[str], records: dict[str, list[dict]],
             metrics: dict, created: float | None = None) -> None:
        row = (run_id, time.time() if created is None else created, model, json.dumps(workload), json.dumps(lanes), json.dumps(records),
               json.dumps(metrics))
        try:
            with closing(self._connect()) as conn, conn:
                conn.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)", row)
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"could not save run {run_id} to {self.path}: {e}") from e

    def _fetch(self, sql: str, args: tuple, failure: str) -> tuple | None:
        """The first row `sql` selects, or None; StoreError (saying `failure`) if the store cannot be read."""
        try:
            with closing(self._connect()) as conn:
                return conn.execute(sql, args).fetchone()
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"{failure} from {self.path}: {e}") from e

    def load(self, run_id: str) -> dict | None:
        """The stored run `{run_id, created, model, workload, lanes, records, metrics}`, or None."""
        keys = ("run_id", "created", "model", "workload", "lanes", "records", "metrics")
        row = self._fetch(f"SELECT {', '.join(keys)} FROM runs WHERE run_id = ?", (run_id,),
                          f"could not read run {run_id}")
        if row is None:
            return None
        run = dict(zip(keys, row))
        for key in ("workload", "lanes", "records", "metrics"):
            run[key] = json.loads(run[key])
        return run

    def has(self, run_id: str) -> bool:
        """Whether run `run_id` is stored, without reading its records."""
        return self._fetch("SELECT 1 FROM runs WHERE run_id = ?", (run_id,), f"could not read run {run_id}") is not None

    def count(self) -> int:
        return self._fetch("SELECT COUNT(*) FROM runs", (), "could not read the runs")[0]


class RedisRunStore:
    """The run store in Redis, for web processes and engine workers on several machines (`--store redis`): one
    key per run, `batch-lanes:stored:<id>`, holding the same JSON document SQLite's row holds, zlib-compressed.
    Runs live as long as Redis keeps its data: give it persistence (`appendonly yes`) and enough memory."""

    def __init__(self, client):
        self.r = client  # a redis.Redis whose responses are bytes (compressed values)

    def health(self) -> dict:
        return {"kind": "redis", "ok": True, "error": None}   # Redis's own health is /healthz's `redis`

    def _key(self, run_id: str) -> str:
        return f"batch-lanes:stored:{run_id}"

    def save(self, run_id: str, model: str, workload: dict, lanes: list[str], records: dict[str, list[dict]],
             metrics: dict, created: float | None = None) -> None:
        doc = {"run_id": run_id, "created": time.time() if created is None else created, "model": model,
               "workload": workload, "lanes": lanes, "records": records, "metrics": metrics}
        try:
            self.r.set(self._key(run_id), zlib.compress(json.dumps(doc).encode(), 6))
        except redis.RedisError as e:
            raise StoreError(f"could not save run {run_id} to Redis: {type(e).__name__}: {e}") from e

    def load(self, run_id: str) -> dict | None:
        try:
            blob = self.r.get(self._key(run_id))
        except redis.RedisError as e:
            raise StoreError(f"could not read run {run_id} from Redis: {type(e).__name__}: {e}") from e
        return None if blob is None else json.loads(zlib.decompress(blob))

    def has(self, run_id: str) -> bool:
        try:
            return bool(self.r.exists(self._key(run_id)))
        except redis.RedisError as e:
            raise StoreError(f"could not read run {run_id} from Redis: {type(e).__name__}: {e}") from e

    def count(self) -> int:
        return sum(1 for _ in self.r.scan_iter("batch-lanes:stored:*"))


def open_store(config: dict, url: str | None) -> RunStore | RedisRunStore:
    """The store `config["STORE"]` names: SQLite under DATA_DIR, or the Redis at `url` (QueueUnreachable if it is down)."""
    if config["STORE"] == "redis":
        if not url:
            raise ValueError("--store redis needs --message-queue redis://...")
        return RedisRunStore(connect_redis(url, decode=False))
    return RunStore(Path(config["DATA_DIR"]) / "runs.sqlite3")
