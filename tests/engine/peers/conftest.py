"""The vLLM tests' engine: our engine on SmolLM2, beside which their vLLM lanes run. Needs `make vllm` (.venv-vllm):
skipped without it, a failure under CI=true or BATCH_LANES_REQUIRE_VLLM=1 (.ci/run installs it)."""
import os

import pytest

from engine import Engine
from engine.peers.vllm_process import vllm_available


@pytest.fixture(scope="module")
def engine(smol):
    if not vllm_available():
        why = "the vLLM lane's virtualenv (.venv-vllm) is missing: run `make vllm`"
        if os.environ.get("CI") == "true" or os.environ.get("BATCH_LANES_REQUIRE_VLLM") == "1":
            pytest.fail(f"{why} (CI=true / BATCH_LANES_REQUIRE_VLLM=1)")
        pytest.skip(why)
    return Engine(smol)
