"""HTTP routes: the page, the health check, a small read-only JSON API, and the security headers.

    GET /                 the page                       GET /api/presets   the demo workloads
    GET /runs/<id>        the page, replaying a run      GET /api/limits    the limits every submit is checked against
    GET /healthz          {status, ready, model, device} GET /api/runs/<id> a finished run: workload, records, metrics

This module reads from the worker and the store; it never starts, changes or computes a run.
"""
import json
from dataclasses import asdict

from flask import Blueprint, current_app, jsonify, render_template

from engine.config import LANES, POLICIES

from .factory import ROOT, SERVER_LIMITS
from .events import RUN_ID
from .runs import Rejected

bp = Blueprint("routes", __name__)
PRESET_ORDER = ("mixed", "same", "one-long")
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; frame-ancestors 'none'")


def _worker():
    return current_app.extensions["worker"]


def _error(status: int, message: str):
    return jsonify({"error": message}), status


@bp.get("/")
def index():
    return render_template("index.html", run_id=None)


@bp.get("/runs/<run_id>")
def run_page(run_id: str):
    try:
        known = RUN_ID.fullmatch(run_id) is not None and _worker().knows(run_id)
    except Rejected as r:
        return _error(503, r.message)
    if not known:
        return _error(404, "no run with this id")
    return render_template("index.html", run_id=run_id)


@bp.get("/healthz")
def healthz():
    s = _worker().status
    body = {"status": "error" if s["error"] else "ok", "ready": s["ready"], "model": s["model"],
            "device": s["device"], "progress": s["progress"], "queued": _worker().queue_length()}
    if s["error"]:
        body["error"] = s["error"]
    return jsonify(body), 503 if s["error"] else 200


def load_presets() -> list[dict]:
    files = sorted((ROOT / "demos").glob("*.json"),
                   key=lambda p: (PRESET_ORDER.index(p.stem) if p.stem in PRESET_ORDER else len(PRESET_ORDER), p.stem))
    return [json.loads(p.read_text()) for p in files]


@bp.get("/api/presets")
def presets():
    return jsonify({"presets": load_presets()})


@bp.get("/api/limits")
def limits():
    server = {name: current_app.config[key] for name, key in SERVER_LIMITS.items()}
    return jsonify({**asdict(_worker().limits), "lanes": list(LANES), "policies": list(POLICIES), **server})


@bp.get("/api/runs/<run_id>")
def run_json(run_id: str):
    if RUN_ID.fullmatch(run_id) is None:
        return _error(404, "no run with this id")
    try:
        run = _worker().stored_run(run_id)
    except Rejected as r:
        return _error(503, r.message)
    if run is None:
        return _error(404, "no finished run with this id")
    return jsonify(run)


@bp.after_app_request
def security_headers(response):
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@bp.app_errorhandler(404)
def not_found(e):
    return _error(404, "not found")


@bp.app_errorhandler(405)
def not_allowed(e):
    return _error(405, "method not allowed")
