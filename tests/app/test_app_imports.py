"""What a web process imports: never torch, transformers, engine.worker.runner or engine.worker.model; nor, without
an OTLP endpoint (app.web.tracing), OpenTelemetry's tracing SDK or gRPC: tracing off costs no import (redis-py
itself imports OpenTelemetry's API where it is installed; that stays).

A web process of a scale-out deployment (`python -m app --message-queue redis://...`) serves the page and the
socket protocol and leaves the model to engine workers. It must run without the model, so the web wing's
import closure holds no module that needs torch: checked in a fresh interpreter, as such a process starts."""
import os
import subprocess
import sys

import pytest

from tests.kit.scale import Deployment
from tests.kit.server import free_port
from tests.kit import ROOT

FORBIDDEN = ("torch", "transformers", "engine.worker.runner", "engine.worker.model", "opentelemetry.sdk.trace", "grpc")
WEB_WING = sorted(f"app.web.{p.stem}" for p in (ROOT / "app" / "web").glob("*.py") if p.stem != "__init__")
SHARED = ("app.cli", "app.settings", "app.protocol", "app.asyncmode", "app.runs.service", "app.runs.redis_book",
          "app.runs.fanout", "app.runs.store", "app.runs.redis_link", "app.live.gateway", "app.live.prom")
REPORT = f"import sys; print(sorted(m for m in {FORBIDDEN!r} if m in sys.modules))"


def run_python(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)


def test_the_web_wing_and_a_web_process_factory_import_no_torch(tmp_path):
    closed = f"redis://127.0.0.1:{free_port()}/0"
    code = "\n".join([
        *(f"import {m}" for m in (*WEB_WING, *SHARED)),
        "from app.web.factory import create_app",
        "from app.runs.redis_link import QueueUnreachable",
        "try:",
        f"    create_app({{'MESSAGE_QUEUE': {closed!r}, 'DATA_DIR': {str(tmp_path)!r}}})",
        "except QueueUnreachable:",
        "    print('unreachable')",
        REPORT])
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["unreachable", "[]"], out.stdout + out.stderr
    assert "app.web.factory" in WEB_WING and "app.web.routes" in WEB_WING and len(WEB_WING) >= 7


@pytest.mark.slow
def test_a_one_process_app_does_import_the_engine_so_the_check_above_can_fail(tmp_path):
    code = "\n".join([
        "from engine import Engine",
        "from app.web.factory import create_app",
        f"app = create_app({{'DATA_DIR': {str(tmp_path)!r}}}, engine=Engine(None))",
        "app.test_client().post('/v1/completions', json={'prompt': 'hi', 'max_tokens': 2})",
        "app.extensions['worker'].stop()",
        REPORT])
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    assert "engine.worker.runner" in out.stdout, out.stdout + out.stderr


@pytest.fixture
def redis_url(tmp_path):
    """A redis-server of its own (tests/kit/scale.py's, which skips or fails as the tier says when it is missing)."""
    d = Deployment(tmp_path)
    d.start_redis()
    try:
        yield d.url
    finally:
        d.stop()


@pytest.mark.redis
def test_a_web_process_serves_its_routes_without_torch(redis_url, tmp_path):
    code = "\n".join([
        "from app.web.factory import create_app",
        f"app = create_app({{'MESSAGE_QUEUE': {redis_url!r}, 'DATA_DIR': {str(tmp_path)!r}}})",
        "c = app.test_client()",
        "codes = [c.get(path).status_code for path in ('/', '/healthz', '/api/limits', '/api/presets', '/metrics')]",
        "codes.append(c.post('/v1/completions', json={'prompt': 'hi'}).status_code)",
        "codes.append(c.post('/api/generate', json={}).status_code)",
        "print(codes)",
        REPORT])
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[200, 200, 200, 200, 200, 503, 200]", "[]"], out.stdout + out.stderr
