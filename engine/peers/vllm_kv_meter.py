"""What a vLLM engine's KV connector moved, per request and per step: files, bytes and the ms of its save and load.

Imported by engine/peers/vllm_bridge.py inside the vLLM virtualenv (never by Batch Lanes). It wraps, on one engine's
instances only, the worker-side connector's `save_kv_layer` / `start_load_kv` (timed: what the forward spends on the
connector) and safetensors' `save_file` / `load_file` (the files `ExampleConnector` writes and reads: one per layer
per request, named by a hash of the request's prompt tokens in full blocks). It attributes a file to a request by
that folder: `folder_of(prompt_ids)` asks the scheduler-side connector for the name it would use. It knows nothing
of lanes or records; `take()` hands the bridge the step's figures and starts the next step's.
"""
import os
import time


class KVMeter:
    def __init__(self, engine, block_size: int):
        import safetensors.torch
        import torch
        from vllm.distributed.kv_transfer import get_kv_transfer_group
        self.torch, self.block_size = torch, block_size
        self.scheduler_connector = engine.engine_core.engine_core.scheduler.connector
        self.folders: dict[str, str] = {}     # storage folder -> our request id
        self.step: dict[str, dict] = {}       # our id -> {"saved"|"loaded": {"files", "bytes", "tokens"}} this step
        self.ms = {"save": 0.0, "load": 0.0}  # connector time inside this step's forward
        worker = get_kv_transfer_group()
        worker.save_kv_layer = self.timed(worker.save_kv_layer, "save")
        worker.start_load_kv = self.timed(worker.start_load_kv, "load")
        save, load = safetensors.torch.save_file, safetensors.torch.load_file

        def save_file(tensors, filename, *args, **kwargs):
            save(tensors, filename, *args, **kwargs)
            self.count("saved", filename, tensors["kv_cache"])

        def load_file(filename, *args, **kwargs):
            tensors = load(filename, *args, **kwargs)
            self.count("loaded", filename, tensors["kv_cache"])
            return tensors
        safetensors.torch.save_file, safetensors.torch.load_file = save_file, load_file

    def timed(self, method, kind: str):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.ms[kind] += (time.perf_counter() - t0) * 1000
        return wrapper

    def watch(self, rid: str, prompt_ids: list[int]) -> None:
        """Name the folders this request's KV is saved under (its prompt) or loaded from (its prompt less one)."""
        for n in (len(prompt_ids), len(prompt_ids) - 1):
            full = (n - 1) // self.block_size * self.block_size   # ExampleConnector's full blocks of n tokens
            folder = self.scheduler_connector._generate_foldername_debug(
                self.torch.tensor(prompt_ids)[:full], [], create_folder=False)
            self.folders.setdefault(folder, rid)

    def count(self, kind: str, filename: str, kv) -> None:
        rid = self.folders.get(os.path.dirname(filename), "?")
        entry = self.step.setdefault(rid, {}).setdefault(kind, {"files": 0, "bytes": 0, "file_bytes": 0, "tokens": 0})
        entry["files"] += 1
        entry["bytes"] += kv.numel() * kv.element_size()   # the K and V of its full blocks, one layer
        entry["file_bytes"] += os.path.getsize(filename)  # with safetensors' header
        entry["tokens"] = kv.shape[0]                      # tokens of that layer's K/V (the same every layer)

    def take(self) -> dict:
        out = {"requests": self.step, "save_ms": round(self.ms["save"], 3), "load_ms": round(self.ms["load"], 3)}
        self.step, self.ms = {}, {"save": 0.0, "load": 0.0}
        return out
