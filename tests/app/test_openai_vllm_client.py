"""vLLM's own benchmark client (`vllm bench serve`, vLLM 0.32 from `make vllm`, through scripts/vllm_client.py) against
the real model's server: the mean TTFT it measures on streamed chat and on streamed completions is the server's own
(its access lines' `ttft_ms`: from the handler's start to the first token's chunk) within 10% (issue 39 item 4: the
chat stream's `role` chunk once left on acceptance, and this client measured 10 ms against the server's 251).

The client starts its clock before the server's handler and stops it after the chunk arrives, so it can only read
more than the server, by the request's way in and the chunk's way out: a first chunk sent before the first token
reads less. A few requests on the session's shared server; skipped without .venv-vllm."""
import json
import os
import re
import subprocess
import time
import urllib.request

import pytest

from engine.peers.vllm_process import vllm_available, vllm_python
from tests.kit.server import ROOT

pytestmark = [pytest.mark.model, pytest.mark.vllm, pytest.mark.slow]
SHAPES = {"chat": {"endpoint": "chat", "input": 32, "output": 8, "prompts": 4, "rate": "inf", "concurrency": 2},
          "completions": {"endpoint": "completions", "input": 32, "output": 8, "prompts": 4, "rate": "inf",
                          "concurrency": 2}}
ROUTES = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


@pytest.fixture(autouse=True)
def _needs_vllm():
    if not vllm_available():
        pytest.skip("vLLM's client lives in .venv-vllm, which is missing: run `make vllm`")


def access_ttfts(log: str, route: str) -> list[float]:
    """ttft_ms of every streamed 200 on `route` in the server's access lines of vLLM's client: it sends an
    X-Request-Id of its own (`bench-<hex>-<i>`), which the line names."""
    line = re.compile(rf"request bench-\S+ POST {re.escape(route)} 200 .*ttft_ms=([0-9.]+).* stream")
    return [float(m.group(1)) for m in line.finditer(log)]


def test_vllms_client_measures_the_servers_own_ttft_on_chat_and_completions(model_server):
    from engine.worker.model import model_folder

    with urllib.request.urlopen(f"{model_server}/v1/models", timeout=10) as r:
        model = json.load(r)["data"][0]["id"]
    before = len(model_server.log())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    p = subprocess.run([str(vllm_python()), str(ROOT / "scripts" / "vllm_client.py"), model_server, model,
                        str(model_folder()), json.dumps(SHAPES)], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    client = json.loads(p.stdout.strip().splitlines()[-1])
    time.sleep(0.5)  # the last stream's access line is written as its response closes
    log = model_server.log()[before:]
    for name, shape in SHAPES.items():
        assert client[name]["completed"] == shape["prompts"] and client[name]["failed"] == 0, client[name]
        server = access_ttfts(log, ROUTES[name])
        assert len(server) == shape["prompts"], (name, server)
        server_mean = sum(server) / len(server)
        # within 10 %, or 30 ms where that is less: the client's clock also holds its connection and the request's
        # parse (a quiet CI-like run: server 69-136 ms, the client more than 10 % above); a role chunk sent on
        # acceptance reads ~6 ms against ~240 ms, far outside either
        allowed = max(0.1 * server_mean, 30.0)
        assert abs(client[name]["mean_ttft_ms"] - server_mean) <= allowed, (name, client[name], server)
