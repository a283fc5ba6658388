"""The vLLM bridge: a real vLLM V1 engine in its own process, stepped one `engine.step()` at a time.

Run as a script by the vLLM virtualenv's python (`.venv-vllm/bin/python engine/peers/vllm_bridge.py`), never imported
by Batch Lanes (vLLM pins another transformers). It reads one JSON object a line on stdin and answers one a line
on stdout (vLLM's own logs go to stderr):

    {"op": "start", "model": FOLDER, "engine_args": {...}}  -> {"ok": true, "kv_blocks", "block_size", "config",
                                                                 "reference_ms"}
    {"op": "add", "id": "r0", "prompt_ids": [...], "max_new_tokens", "ignore_eos", "temperature", "top_p", "seed"}
                                                             -> {"ok": true}
    {"op": "step"}   -> {"ok": true, "ms", "scheduled": {id: [computed_before, n, num_tokens, prompt_len]},
                         "dispatched": batches scheduled, "preempted": [...], "outputs": {id: {"token_ids": [...new], "finish": reason|null}},
                         "waiting": [...], "running": [...], "kv_usage": 0..1}
    (an engine started with a `kv_transfer_config`, one of a P/D pair, adds "kv_io" to each step's answer:
     {"requests": {id: {"saved"|"loaded": {"files", "bytes", "file_bytes", "tokens"}}}, "save_ms", "load_ms"},
     engine/peers/vllm_kv_meter.py)
    {"op": "reset"}  -> clears the prefix cache between runs          {"op": "exit"}

`scheduled` is the batch whose model output came back in this step: for one engine, or one split by tensor
parallelism, the batch it scheduled; for a pipeline-parallel one (2 batches in flight), the one it scheduled earlier,
while this step only dispatched its own (`dispatched`). Started with `tensor_parallel_size` or
`pipeline_parallel_size`, vLLM runs its workers as processes of their own (its multiprocessing executor; the engine
core and its scheduler stay here); the start's answer names them ("workers": `where`).

It computes only when asked to step (lockstep with the other lanes: never two computations at once). It does
not know slots, step records or our vocabulary: engine/peers/vllm_lane.py turns its answers into StepRecords.
"""
import json
import os
import sys
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine core in this process: its scheduler reachable
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0-1")      # the default binding gives the worker one core of two
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
# vLLM 0.32's AOT compile cache fails to load on every start here ('function' object has no attribute
# 'finalize_loading') and compiles again; its older Inductor cache path is tried instead
os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")


def where(worker) -> dict:
    """Run in each of vLLM's worker processes (`collective_rpc`): its pid, threads, cores, ranks, and the class that
    carries its tensor- and pipeline-parallel groups' collectives (vLLM-CPU's shared-memory one, or torch.distributed)."""
    import torch
    from vllm.distributed.parallel_state import get_pp_group, get_tp_group

    def carrier(group) -> str | None:
        comm = getattr(group, "device_communicator", None)
        if group.world_size == 1 or comm is None:
            return None
        module = getattr(comm, "dist_module", None)
        return f"{type(comm).__name__}/{getattr(module, '__name__', type(module).__name__)}"
    return {"pid": os.getpid(), "threads": torch.get_num_threads(), "cores": sorted(os.sched_getaffinity(0)),
            "tp_rank": get_tp_group().rank_in_group, "pp_rank": get_pp_group().rank_in_group,
            "tp": carrier(get_tp_group()), "pp": carrier(get_pp_group())}


def gone(pid: int) -> bool:
    """Whether a process has exited (absent, or a zombie its parent has not reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def ours(internal_id: str) -> str:
    """Our request id from vLLM's internal one (it appends a random suffix: "r3-1f2e...")."""
    return internal_id.split("-", 1)[0]


class Bridge:
    def __init__(self, model: str, engine_args: dict):
        from vllm import LLM
        self.llm = LLM(model=model, dtype="float32", **engine_args)
        self.engine = self.llm.llm_engine
        self.scheduler = self.engine.engine_core.engine_core.scheduler
        self.last = None                # the scheduler output whose batch this step finished (its preemptions)
        self.scheduled: dict = {}       # that batch: our id -> [computed before it, its tokens, num_tokens, prompt]
        self.dispatched = 0             # batches scheduled this step (a pipeline's engine finishes them a step later)
        self.in_flight: dict[int, tuple] = {}  # id(a scheduler output) -> (it, its batch) until its batch is back
        schedule, update = self.scheduler.schedule, self.scheduler.update_from_output

        def scheduled(*args, **kwargs):  # the scheduler's decision, read before the model runs
            out = schedule(*args, **kwargs)
            batch = {}
            for rid, n in out.num_scheduled_tokens.items():
                req = self.scheduler.requests[rid]
                # schedule() has already counted this step's tokens as computed: before the step, n fewer
                batch[ours(rid)] = [req.num_computed_tokens - n, n, req.num_tokens, req.num_prompt_tokens]
            self.in_flight[id(out)] = (out, batch)
            self.dispatched += out.total_num_scheduled_tokens > 0
            return out

        def finished(scheduler_output, *args, **kwargs):  # a batch's model output is back: the step it finished in
            # (one engine: the step that scheduled it; pipeline-parallel: with 2 batches in flight, a later one)
            _, batch = self.in_flight.pop(id(scheduler_output), (None, {}))
            self.last = scheduler_output
            self.scheduled.update(batch)
            return update(scheduler_output, *args, **kwargs)
        self.scheduler.schedule, self.scheduler.update_from_output = scheduled, finished
        self.seen: dict[str, int] = {}  # our id -> output tokens reported so far
        self.meter = None  # with a KV connector (a P/D pair's engine): what it moved, per request and step
        if engine_args.get("kv_transfer_config"):
            from vllm_kv_meter import KVMeter
            self.meter = KVMeter(self.engine, self.engine.vllm_config.cache_config.block_size)
        self.workers: list[dict] = []
        self.reference_ms = self.warm_up()
        self.workers = self.llm.collective_rpc(where)  # one answer per rank, in rank order

    def warm_up(self) -> float:
        """One throwaway request through every step kind (its first steps are slower); returns a one-row decode
        step's ms: what a step that computes nothing lasts before the lane measured one of its own."""
        self.add({"id": "warmup", "prompt_ids": [1] * 8, "max_new_tokens": 4, "ignore_eos": True})
        times = []
        while self.engine.has_unfinished_requests():
            answer = self.step()
            if answer["scheduled"]:  # a step that finished a batch (a pipeline's dispatch-only steps last ~1 ms)
                times.append(answer["ms"])
        self.llm.reset_prefix_cache()
        self.seen.clear()
        return min(times[1:] or times)

    def info(self) -> dict:
        sc, cc = self.engine.vllm_config.scheduler_config, self.engine.vllm_config.cache_config
        manager = self.scheduler.kv_cache_manager
        return {"kv_blocks": manager.block_pool.num_gpu_blocks, "block_size": cc.block_size, "workers": self.workers,
                "reference_ms": self.reference_ms,
                "config": {"max_num_seqs": sc.max_num_seqs, "max_num_batched_tokens": sc.max_num_batched_tokens,
                           "enable_chunked_prefill": sc.enable_chunked_prefill,
                           "enable_prefix_caching": cc.enable_prefix_caching,
                           "long_prefill_token_threshold": sc.long_prefill_token_threshold}}

    def add(self, msg: dict) -> dict:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        params = SamplingParams(max_tokens=msg["max_new_tokens"], ignore_eos=msg["ignore_eos"],
                                temperature=msg.get("temperature", 0.0), top_p=msg.get("top_p", 1.0),
                                seed=msg.get("seed"), detokenize=False)
        self.engine.add_request(msg["id"], TokensPrompt(prompt_token_ids=msg["prompt_ids"]), params)
        self.seen[msg["id"]] = 0
        if self.meter is not None:
            self.meter.watch(msg["id"], msg["prompt_ids"])
        return {}

    def step(self) -> dict:
        self.last, self.scheduled, self.dispatched = None, {}, 0
        t0 = time.perf_counter()
        try:
            results = self.engine.step()
        except Exception as e:  # a split engine whose worker died says only "cancelled": name the worker
            dead = [w for w in self.workers if w["pid"] != os.getpid() and gone(w["pid"])]
            if dead:  # by now vLLM has ended the others too: which one died first is not known here
                raise RuntimeError("a worker of this split vLLM engine died and vLLM ended its workers (exited: " +
                                   ", ".join(f"pid {w['pid']}, tp rank {w['tp_rank']} pp stage {w['pp_rank']}"
                                             for w in dead) + f"; vLLM said {str(e)[:80]!r})") from e
            raise
        ms = (time.perf_counter() - t0) * 1000
        outputs = {}
        for res in results:
            rid = ours(res.request_id)
            ids = list(res.outputs[0].token_ids)
            new, self.seen[rid] = ids[self.seen.get(rid, 0):], len(ids)
            finish = res.outputs[0].finish_reason if res.finished else None
            if new or finish:
                outputs[rid] = {"token_ids": new, "finish": finish}
        out = self.last
        kv_io = {"kv_io": self.meter.take()} if self.meter is not None else {}
        return {"ms": ms, "scheduled": self.scheduled, "dispatched": self.dispatched, "outputs": outputs, **kv_io,
                "preempted": sorted(ours(r) for r in (getattr(out, "preempted_req_ids", None) or ())),
                "waiting": [ours(r.request_id) for r in self.scheduler.waiting],
                "running": [ours(r.request_id) for r in self.scheduler.running],
                "kv_usage": self.scheduler.kv_cache_manager.usage}

    def reset(self) -> dict:
        assert not self.engine.has_unfinished_requests(), "reset with requests still running"
        self.llm.reset_prefix_cache()
        self.seen.clear()
        if self.meter is not None:
            self.meter.folders.clear()
        return {}


def main() -> None:
    # stdout carries only our answers: anything vLLM prints goes to stderr, its worker processes' (a TP/PP group's
    # ranks inherit file descriptor 1) included, so fd 1 itself points at stderr and the answers go to a copy of it
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    bridge = None
    for line in sys.stdin:
        msg = json.loads(line)
        op = msg.get("op")
        try:
            if op == "start":
                bridge = Bridge(msg["model"], msg.get("engine_args", {}))
                answer = bridge.info()
            elif op == "exit":
                break
            else:
                answer = getattr(bridge, op)(msg) if op == "add" else getattr(bridge, op)()
        except Exception as e:  # the answer names the failure; our side raises it as the run's error
            answer = {"ok": False, "error": f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"}
            out.write(json.dumps(answer) + "\n")
            out.flush()
            if op == "start":
                break
            continue
        out.write(json.dumps({"ok": True, **answer}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
