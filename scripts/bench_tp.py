"""Which library shards SmolLM2 faster at decode shapes: transformers' TP plan or torch's tensor-parallel API.

    python -m scripts.bench_tp [--size 3] [--iters 15]

Spawns `--size` processes (gloo on CPU, one thread each); each loads the model and shards it two ways:
transformers' `from_pretrained(..., distributed_config=DistributedConfig(tp_size=N))` (Llama's base_model_tp_plan)
and torch's `parallelize_module` with the same plan (ColwiseParallel for q/k/v and gate/up, RowwiseParallel for o
and down). Each times one forward of the decoder + lm_head at 1 and 8 rows (one token a row, no cache: the linears
and the all-reduces are what differs between the two), beside the unsharded model in one process. Rank 0 prints
the medians in ms and the machine's load. A benchmark that prints figures, not a test.
"""
import argparse
import datetime
import os
import statistics
import time

import torch
import torch.multiprocessing as mp

from engine.worker.rank_group import free_port


def timed(model, rows: int, iters: int) -> float:
    ids = torch.full((rows, 1), 5)
    times = []
    with torch.inference_mode():
        for _ in range(iters):
            t0 = time.perf_counter()
            hidden = model.model(input_ids=ids).last_hidden_state
            model.lm_head(hidden[:, -1])
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def torch_plan(model, mesh):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    for layer in model.model.layers:
        plan = {f"self_attn.{p}": ColwiseParallel() for p in ("q_proj", "k_proj", "v_proj")}
        plan |= {"self_attn.o_proj": RowwiseParallel(), "mlp.gate_proj": ColwiseParallel(),
                 "mlp.up_proj": ColwiseParallel(), "mlp.down_proj": RowwiseParallel()}
        parallelize_module(layer, mesh, plan)
    return model


def rank_main(rank: int, size: int, port: int, folder: str, iters: int) -> None:
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM
    from transformers.distributed import DistributedConfig
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(size),
                      LOCAL_RANK=str(rank))
    dist.init_process_group("gloo", rank=rank, world_size=size, timeout=datetime.timedelta(seconds=120))
    mesh = torch.distributed.init_device_mesh("cpu", (size,))
    kw = dict(dtype=torch.float32, attn_implementation="sdpa")
    hf = AutoModelForCausalLM.from_pretrained(folder, distributed_config=DistributedConfig(tp_size=size), **kw).eval()
    tp = torch_plan(AutoModelForCausalLM.from_pretrained(folder, **kw).eval(), mesh)
    figures = {}
    for name, model in (("transformers", hf), ("torch", tp)):
        for rows in (1, 8):
            timed(model, rows, 2)
            dist.barrier()
            figures[f"{name} {rows} rows"] = timed(model, rows, iters)
    if rank == 0:
        q = hf.model.layers[0].self_attn.q_proj.weight
        print(f"transformers q_proj weight on rank 0: {type(q).__name__} local "
              f"{tuple(q.to_local().shape) if hasattr(q, 'to_local') else tuple(q.shape)}")
        for k, v in figures.items():
            print(f"TP={size} {k}: {v:.1f} ms")
    dist.destroy_process_group()


def main() -> None:
    from engine.worker.model import model_folder
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=3)
    p.add_argument("--iters", type=int, default=15)
    args = p.parse_args()
    folder = str(model_folder())
    print(f"load before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(1)
    one = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="sdpa").eval()
    for rows in (1, 8):
        timed(one, rows, 2)
        print(f"TP=1 (one process, one thread) {rows} rows: {timed(one, rows, args.iters):.1f} ms")
    del one
    mp.spawn(rank_main, args=(args.size, free_port(), folder, args.iters), nprocs=args.size, join=True)
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
