"""The paged KV cache on a device (a section of scripts/gpu_check.py): a 2-layer random Llama decodes rows whose block
tables are random permutations of the pool, through CUDA graphs (block tables and positions in static device tensors)
and through transformers' forward, next to the slots' own contiguous runs; every variant must write the same tokens.
Then the copies' cost there: swap-out and swap-in ms per block (pinned host pool) vs a one-block prefill."""
from dataclasses import replace

import torch


def random_llama(device: str):
    """A 2-layer random Llama (seeded, no tokenizer) on the device: what the graph checks decode with."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from engine.worker.model import LoadedModel

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, initializer_range=0.2,
                         attn_implementation="sdpa")
    return LoadedModel(LlamaForCausalLM(config).to(device).eval(), None, "tiny", torch.device(device), torch.float32,
                       frozenset(), 0)


def paged_graphs(device: str) -> dict:
    from engine.worker.runner import ModelRunner
    from tests.kit.paged import drive, permuted_tables

    lm = random_llama(device)
    out, bs, new = {}, 4, 8
    for n in (1, 3, 5, 8):
        prompts = [[(7 * i + j) % 1000 for j in range(3 + 5 * i)] for i in range(n)]
        per_row = -(-(max(map(len, prompts)) + new) // bs)
        tokens = {}
        for path in ("eager", "fast"):
            for layout in ("runs", "permuted"):
                runner = ModelRunner(replace(lm, decode_step=path), n, n * per_row, bs)
                tables = [list(range(i * per_row, (i + 1) * per_row)) for i in range(n)] if layout == "runs" else \
                    permuted_tables(n * per_row, n, per_row, seed=n)
                tokens[f"{path}_{layout}"] = drive(runner, prompts, tables, new, stagger=True)
                if path == "fast" and runner.fast is not None and runner.fast.graphed:
                    out.setdefault("graphs", {})[str(n)] = sorted(runner.fast.graphs)
        out[str(n)] = {"equal": len({str(t) for t in tokens.values()}) == 1}
    out["all_equal"] = all(v["equal"] for k, v in out.items() if k.isdigit())
    runner = ModelRunner(lm, 1, 64, 16, host_blocks=64)
    pairs = [(i, i) for i in range(64)]
    runner.cache.apply(swap_out=pairs), runner.cache.apply(swap_in=pairs)  # untimed first
    out["swap_out_ms_per_block"] = runner.cache.apply(swap_out=pairs) / 64
    out["swap_in_ms_per_block"] = runner.cache.apply(swap_in=pairs) / 64
    out["host_pinned"] = runner.cache.host.is_pinned()
    return out
