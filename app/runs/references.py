"""Reference runs: for each preset, the stored run a teacher recorded on this machine to replay in class.

A reference is a pointer into the run store (app/runs/store.py keeps the run itself, records and metrics, across
restarts): {preset: {"run_id", "recorded_at"}} in one JSON file under the server's data dir, next to the run
store, written whole (a temporary file, then a rename), so a restart or a crash mid-write keeps the old or the
new reference, never half of one. Recording a preset again replaces its reference. This module knows JSON and
files, nothing of Flask, runs or sockets.
"""
import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path

from .store import StoreError

_WRITE = threading.Lock()  # one writer at a time in this process


class ReferenceBook:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    def all(self) -> dict[str, dict]:
        """Every preset's reference, {preset: {"run_id", "recorded_at"}} ({} before the first)."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise StoreError(f"could not read the reference runs from {self.path}: {e}") from e
        try:
            refs = json.loads(text)
        except json.JSONDecodeError as e:
            raise StoreError(f"the reference runs file {self.path} is not JSON ({e}): remove it to start again") from e
        return refs if isinstance(refs, dict) else {}

    def record(self, preset: str, run_id: str, now: datetime | None = None) -> dict:
        """Make `run_id` the reference of `preset` (replacing any), recorded at `now` (UTC); returns the reference."""
        when = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
        ref = {"run_id": run_id, "recorded_at": when.strftime("%Y-%m-%dT%H:%M:%SZ")}
        with _WRITE:
            refs = {**self.all(), preset: ref}
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp.write_text(json.dumps(refs, indent=1, sort_keys=True) + "\n")
                os.replace(tmp, self.path)
            except OSError as e:
                raise StoreError(f"could not save the reference run of {preset!r} to {self.path}: {e}") from e
        return ref
