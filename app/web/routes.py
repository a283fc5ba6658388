"""HTTP routes: the page, the health check, a small read-only JSON API, and the security headers.

    GET /                 the page                       GET /api/presets   the demo workloads
    GET /runs/<id>        the page, replaying a run      GET /api/limits    the limits every submit is checked against
    GET /sweep[/<id>]     the load-sweep view            GET /runs/<id>/qr.svg  a QR code of the run's link
    GET /compare/<a>/<b>  two stored runs on one clock   POST /api/tokens   prompt token counts (the editor's)
    GET /healthz          {status, ready, model, redis?} GET /api/runs/<id> a finished run: workload, records, metrics
                                                         POST /api/generate  requests drawn from an arrival process

This module reads from the runs (app.runs.service) and the store; it never starts, changes or computes a run.
"""
import json
from dataclasses import asdict

from flask import Blueprint, Response, current_app, jsonify, render_template, request

from engine.admission import ORDERS
from engine.workload.arrivals import generate_requests
from engine.config import EngineConfig
from engine.limits import CLI_LIMITS, WorkloadError
from engine.sched.policies import POLICIES
from engine.workload.trace import shipped_names, shipped_trace
from engine.workload.workload import parse_workload

from ..live.capture import capture_spec
from ..live.gateway import Unavailable
from ..protocol import RUN_ID, Rejected, resolved_of
from ..settings import ROOT, SERVER_LIMITS
from . import serving
from .class_routes import qr_response
from .bodies import json_body

bp = Blueprint("routes", __name__)
# the class plan's order (docs/teaching.md, "Teaching with Batch Lanes"); the other demos follow by name
PRESET_ORDER = ("mixed", "same", "one-long", "arrivals", "long-prompt", "memory-pressure", "priorities", "slots")
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; frame-ancestors 'none'")


def _runs():
    return current_app.extensions["runs"]


def _error(status: int, message: str):
    return jsonify({"error": message}), status


@bp.get("/")
def index():
    return render_template("index.html", run_id=None)


def _known(run_id: str) -> bool:
    """Whether `run_id` names a run the page can show; `Rejected` (storage) if the store cannot be read."""
    return RUN_ID.fullmatch(run_id) is not None and _runs().knows(run_id)


@bp.get("/runs/<run_id>")
def run_page(run_id: str):
    """The page replaying a run; for an unknown id the page itself says so (status 404), not raw JSON."""
    try:
        known = _known(run_id)
    except Rejected as r:
        return _error(503, r.message)
    if not known:
        return render_template("index.html", run_id=None, missing_run=run_id[:64]), 404
    return render_template("index.html", run_id=run_id)


@bp.get("/runs/<run_id>/qr.svg")
def run_qr(run_id: str):
    """A QR code (SVG, drawn by segno) of the link to a run, for students' phones: at the server's public address
    (app.web.public_url), never at a client-chosen Host."""
    try:
        known = _known(run_id)
    except Rejected as r:
        return _error(503, r.message)
    if not known:
        return _error(404, "no run with this id")
    return qr_response(f"runs/{run_id}")


@bp.get("/compare/<first>/<second>")
def compare_page(first: str, second: str):
    """Two stored runs side by side on one clock (each fetched from /api/runs/<id> by the page)."""
    try:
        missing = [run_id[:64] for run_id in (first, second) if not _known(run_id)]
    except Rejected as r:
        return _error(503, r.message)
    return render_template("compare.html", runs=[first, second], missing=missing), 404 if missing else 200


@bp.post("/api/tokens")
def tokens():
    """{"prompts": [str, ...]} -> {"tokens": [chat-templated prompt tokens of each]}: the editor's live count, with
    the server's own tokenizer (the simulator's estimate when it runs without a model)."""
    body = json_body(request)
    limits = current_app.config["LIMITS"]
    prompts = body.get("prompts") if isinstance(body, dict) else None
    if not isinstance(prompts, list) or len(prompts) > limits.max_requests or not all(
            isinstance(p, str) and len(p) <= limits.max_prompt_chars for p in prompts):
        return jsonify({"error": f"send {{\"prompts\": [...]}}: at most {limits.max_requests} strings of at most "
                                 f"{limits.max_prompt_chars} characters", "field": "prompts"}), 400
    try:
        return jsonify({"tokens": _runs().count_tokens(prompts)})
    except Rejected as r:
        return _error(503, r.message)


@bp.get("/sweep")
@bp.get("/sweep/<run_id>")
def sweep_page(run_id: str | None = None):
    """The load-sweep view: p95 TTFT and goodput against request rate, a line per lane (a live sweep rejoins by id)."""
    if run_id is not None and RUN_ID.fullmatch(run_id) is None:
        return _error(404, "no sweep with this id")
    return render_template("sweep.html", run_id=run_id)


@bp.get("/live")
def live_page():
    """The Live view: the OpenAI endpoint's traffic on the live lane, as it happens."""
    return render_template("live.html")


def _live():
    live = current_app.extensions.get("live")
    if live is None:
        raise Rejected("unavailable", "this process has no live lane")
    return live


@bp.get("/api/live")
def live_snapshot():
    """The live lane now: its recent steps and requests (what the Live view opens with)."""
    try:
        return jsonify(_live().snapshot())
    except Rejected as r:
        return _error(501, r.message)


@bp.get("/api/live/capture")
def live_capture():
    """The last finished live requests as a workload (`?last=N`, at most max_requests; `&window_s=S`: only those
    that arrived in the last S seconds; `&compress_over_s=G[&compress_to_s=T]`: gaps over G s cut to T s, 1 by
    default), which replays on any lanes: arrivals in ms, prompts, the observed output lengths as fixed lengths."""
    try:
        spec = capture_spec(request.args, current_app.config["LIMITS"].max_requests)
    except WorkloadError as e:
        return jsonify({"error": str(e), "field": e.field}), 400
    try:
        workload = _live().capture(spec)
    except Rejected as r:
        return _error(501, r.message)
    except Unavailable as u:
        return _error(u.status, u.message)
    download = request.args.get("download") == "1"
    response = jsonify(workload)
    if download:
        response.headers["Content-Disposition"] = 'attachment; filename="captured.json"'
    return response


@bp.get("/metrics")
def metrics():
    """The live lane's numbers in Prometheus's text format (app.live.prom)."""
    m = current_app.extensions.get("metrics")
    if m is None:
        return _error(501, "this process has no live lane to measure")
    return Response(m.exposition(), headers={"Content-Type": m.content_type})


@bp.get("/healthz")
def healthz():
    body, status = _runs().health()
    return jsonify(body), status


def preset_rank(name: str) -> tuple[int, str]:
    """Where a demo goes among the presets: the class plan's first, in its order, then the rest by name."""
    return (PRESET_ORDER.index(name) if name in PRESET_ORDER else len(PRESET_ORDER), name)


def load_presets() -> list[dict]:
    """The demos as checked, normalised workloads (lanes and options spelled out as a submit gives them back); a
    generated demo also keeps its `generate` spec, for the editor's arrival-process fields; a trace demo its `trace`."""
    files = sorted((ROOT / "demos").glob("*.json"), key=lambda p: preset_rank(p.stem))
    presets = []
    for path in files:
        obj = json.loads(path.read_text())
        preset = parse_workload(obj, CLI_LIMITS).to_dict()
        if "generate" in obj:
            preset["generate"] = obj["generate"]
        if "trace" in obj:  # a trace slice (engine/workload/trace.py), which a sweep replays at each rate
            preset["trace"] = obj["trace"]
        if "claims" in obj:  # the lesson's claims, checked against the run by the page (static/js/lanes/claims.js)
            preset["claims"] = obj["claims"]
        presets.append(preset)
    return presets


@bp.get("/api/presets")
def presets():
    return jsonify({"presets": load_presets()})


@bp.get("/api/limits")
def limits():
    server = {name: current_app.config[key] for name, key in SERVER_LIMITS.items()}
    # the smallest kv_budget EngineConfig takes is one block of the default kv_block_size: the editor refuses less
    return jsonify({**asdict(current_app.config["LIMITS"]), "lanes": list(POLICIES), "policies": list(ORDERS), **server,
                    "min_kv_budget": EngineConfig.kv_block_size, "traces": shipped_names()})


@bp.post("/api/generate")
def generate():
    """The requests a `generate` spec draws (engine.workload.arrivals), or `{"trace": {...}}` a shipped trace slice replays
    (engine.workload.trace), for the editor to show and edit; 400 names the field."""
    spec = json_body(request)
    try:
        if isinstance(spec, dict) and "trace" in spec:
            return jsonify(shipped_trace(spec["trace"], current_app.config["LIMITS"]))
        return jsonify({"requests": generate_requests(spec, current_app.config["LIMITS"])})
    except WorkloadError as e:
        return jsonify({"error": str(e), "field": e.field}), 400


@bp.get("/api/runs/<run_id>")
def run_json(run_id: str):
    if RUN_ID.fullmatch(run_id) is None:
        return _error(404, "no run with this id")
    try:
        run = _runs().stored_run(run_id)
    except Rejected as r:
        return _error(503, r.message)
    if run is None:
        return _error(404, "no finished run with this id")
    return jsonify({**run, **resolved_of(run["workload"])})  # as run_started gives it: lanes and requests resolved


@bp.after_app_request
def security_headers(response):
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@bp.app_errorhandler(404)
def not_found(e):
    return serving.v1_error(e) or _error(404, "not found")   # under /v1, OpenAI's error object


@bp.app_errorhandler(405)
def not_allowed(e):
    return serving.v1_error(e) or _error(405, "method not allowed")
