"""HTTP for reference runs (app/runs/references.py): which preset has one, and recording one.

    GET  /api/references             {"references": {preset: {"run_id", "recorded_at"}}}
    POST /api/references/<preset>    {"run_id", "class"?, "token"?}: make that stored run the preset's reference (the
                                     page sends it when the run it started with "Record reference" has finished and
                                     been stored); while a class is open, only its teacher may (its code and token)

A run is accepted as a preset's reference only if it is in the run store (so it replays after a restart) and is a
run of that preset: its mix's name and requests (ids, prompts up to whitespace, token counts, arrivals) are the
preset's. Errors are
400/404 naming the field, 403 for anyone but a teacher while a class is open, 503 when the store (or the
classes' Redis) cannot be read or written.
"""
from pathlib import Path

from flask import Blueprint, current_app, jsonify, request

from ..protocol import RUN_ID, Rejected
from ..runs.references import ReferenceBook
from ..runs.store import StoreError
from .bodies import json_body
from .routes import load_presets

bp = Blueprint("references", __name__)
SAME = ("id", "max_new_tokens", "arrival", "arrival_ms")  # with the prompt: what makes a stored run a run of the preset


def _requests(workload: dict) -> list[dict]:
    """What a run of a preset shares with it: each request's id, tokens, arrival and prompt up to its whitespace (the
    page's editor keeps a prompt's newlines now, but runs stored before it did had lost them)."""
    return [{**{k: q.get(k) for k in SAME}, "prompt": "".join(str(q.get("prompt", "")).split())}
            for q in workload.get("requests", [])]


def _book() -> ReferenceBook:
    return ReferenceBook(Path(current_app.config["DATA_DIR"]) / "references.json")


def _error(status: int, message: str, field: str | None = None):
    return jsonify({"error": message, **({"field": field} if field else {})}), status


@bp.get("/api/references")
def references():
    try:
        return jsonify({"references": _book().all()})
    except StoreError as e:
        return _error(503, str(e))


@bp.post("/api/references/<preset>")
def record(preset: str):
    body = json_body(request)   # too deep or a lone surrogate: a 400 (app.web.bodies)
    run_id = body.get("run_id") if isinstance(body, dict) else None
    if not isinstance(run_id, str) or RUN_ID.fullmatch(run_id) is None:
        return _error(400, "run_id: give the id of a finished run of this preset", "run_id")
    wanted = next((p for p in load_presets() if p["name"] == preset), None)
    if wanted is None:
        return _error(404, f"no preset named {preset[:40]!r}", "preset")
    try:
        current_app.extensions["classes"].may_record(body.get("class"), body.get("token"))
    except Rejected as r:
        return _error(503 if r.code == "unavailable" else 403, r.message, r.field)
    try:
        run = current_app.extensions["store"].load(run_id)
        if run is None:
            return _error(404, f"run_id: run {run_id} is not stored (has it finished?)", "run_id")
        if run["workload"].get("name") != preset or _requests(run["workload"]) != _requests(wanted):
            return _error(400, f"run_id: run {run_id} is not a run of the preset {preset!r}", "run_id")
        return jsonify({"preset": preset, **_book().record(preset, run_id)})
    except StoreError as e:
        return _error(503, str(e))
