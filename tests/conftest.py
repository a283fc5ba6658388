"""Shared fixtures: the real default model (loaded once per session), a tiny random-weight Llama, and
helpers that build workloads and reference outputs."""
import pytest
import torch

from engine.model import LoadedModel, load_model


@pytest.fixture(scope="session")
def smol() -> LoadedModel:
    """The real default model, SmolLM2-135M-Instruct, float32 on CPU."""
    return load_model(dtype="float32", device="cpu")


@pytest.fixture(scope="session")
def tiny(smol) -> LoadedModel:
    """A 2-layer random-weight Llama with SmolLM2's tokenizer and chat template (weights are sharp enough
    that greedy argmax has clear margins)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(smol.tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048, initializer_range=0.2, tie_word_embeddings=True,
                         attn_implementation="sdpa")
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = None
    return LoadedModel(model, smol.tokenizer, "tiny-random-llama", torch.device("cpu"), torch.float32,
                       frozenset(), smol.pad_id)


def solo_generate(lm: LoadedModel, prompt_ids, max_new_tokens: int, eos_ids=()) -> list[int]:
    """What `model.generate(do_sample=False)` writes for one request alone (the exactness reference)."""
    from transformers import GenerationConfig

    # an empty eos list makes generate() ignore EOS (None would fall back to the model's own EOS)
    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=lm.pad_id,
                              eos_token_id=list(eos_ids))
    x = torch.tensor([list(prompt_ids)])
    with torch.inference_mode():
        out = lm.model.generate(x, attention_mask=torch.ones_like(x), generation_config=config)
    return out[0, x.shape[1]:].tolist()


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium through Playwright, one per test module (tests/kit/browser.py: a skip, or under
    BATCH_LANES_REQUIRE_BROWSER=1 a failure, when it is missing)."""
    from tests.kit.browser import chromium
    with chromium() as b:
        yield b


# --- the server (app/): apps whose engine worker is stopped after each test, and socket test clients ---

class SocketProbe:
    """A Flask-SocketIO test client that keeps every event it received, in order, as (name, payload).

    It reads the client's packet list by index and never clears it, so events the engine worker appends
    from its own thread can't be lost between two reads."""

    def __init__(self, client):
        self.client = client
        self.events: list[tuple[str, object]] = []

    def emit(self, event: str, *args) -> None:
        self.client.emit(event, *args)

    def poll(self) -> list[tuple[str, object]]:
        new = self.client.queue[len(self.events):]
        self.events += [(p["name"], p["args"][0] if p["args"] else None) for p in new]
        return self.events

    def named(self, name: str, run_id: str | None = None) -> list:
        return [p for n, p in self.poll() if n == name and (run_id is None or p.get("run_id") == run_id)]

    def wait_for(self, name: str, run_id: str | None = None, timeout: float = 180) -> dict:
        """The first `name` event (for `run_id`, if given); fails the test after `timeout` seconds."""
        import time
        deadline = time.monotonic() + timeout
        while not self.named(name, run_id):
            assert time.monotonic() < deadline, f"no {name} event within {timeout} s; got {[n for n, _ in self.events]}"
            time.sleep(0.02)
        return self.named(name, run_id)[0]

    def disconnect(self) -> None:
        if self.client.is_connected():
            self.client.disconnect()


@pytest.fixture
def make_app(tmp_path):
    """`make_app(config=None, engine=None)`: `create_app` with its data under tmp_path; workers stopped afterwards."""
    from app.factory import create_app

    apps = []

    def make(config: dict | None = None, engine=None):
        app = create_app({"DATA_DIR": tmp_path / "data", **(config or {})}, engine=engine)
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.extensions["worker"].stop()


@pytest.fixture
def connect():
    """`connect(app) -> SocketProbe`: a socket test client on `app`; all are disconnected afterwards."""
    from app.extensions import socketio

    probes = []

    def make(app, **kwargs) -> SocketProbe:
        probe = SocketProbe(socketio.test_client(app, **kwargs))
        probes.append(probe)
        return probe

    yield make
    for probe in probes:
        probe.disconnect()
