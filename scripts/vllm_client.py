"""vLLM's own benchmark client (`vllm bench serve`) against one OpenAI server, for several shapes in one process:
run by .venv-vllm's Python (scripts/bench_vllm.py's serve race), never by ours. Prints one JSON line: per shape
what `vllm bench serve` reports (a benchmark, not a test: it asserts nothing).

    .venv-vllm/bin/python scripts/vllm_client.py URL MODEL TOKENIZER_FOLDER SHAPES_JSON

SHAPES_JSON maps a name to {"endpoint": "completions" | "chat", "input": tokens, "output": tokens, "prompts": n,
"rate": req/s or "inf", "concurrency": n or null}, and optionally "prefix": tokens every prompt shares
(`--random-prefix-len`), "seed" (default 0) and "detail": a path on the server (`/api/live`) whose JSON
answer is fetched right after the shape and kept as "snapshot", beside each request's TTFT in the order sent
("ttfts_ms"). Every shape uses the random dataset and `--ignore-eos`,
and the client's defaults otherwise (vLLM 0.32's client sends no temperature: both servers sample at 1.0).
(The `vllm` command fails here on a package-name lookup, so this calls `vllm.benchmarks.serve.main` itself.)
"""
import contextlib
import io
import json
import sys
import urllib.request

KEEP = ("completed", "failed", "duration", "total_input_tokens", "output_throughput", "request_throughput",
        "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "median_itl_ms", "p99_itl_ms", "total_output_tokens")
ENDPOINTS = {"completions": ("openai", "/v1/completions"), "chat": ("openai-chat", "/v1/chat/completions")}


def arguments(url: str, model: str, tokenizer: str, shape: dict) -> list[str]:
    backend, endpoint = ENDPOINTS[shape["endpoint"]]
    args = ["--backend", backend, "--base-url", url, "--endpoint", endpoint, "--model", model, "--tokenizer", tokenizer,
            "--dataset-name", "random", "--random-input-len", str(shape["input"]),
            "--random-output-len", str(shape["output"]), "--num-prompts", str(shape["prompts"]),
            "--request-rate", str(shape["rate"]), "--ignore-eos", "--seed", str(shape.get("seed", 0)), "--disable-tqdm"]
    if shape.get("prefix"):
        args += ["--random-prefix-len", str(shape["prefix"])]
    if shape.get("concurrency"):
        args += ["--max-concurrency", str(shape["concurrency"])]
    return args


def main(argv: list[str]) -> None:
    from vllm.benchmarks.serve import add_cli_args, main as bench
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    url, model, tokenizer, shapes = argv[0], argv[1], argv[2], json.loads(argv[3])
    out = {}
    for name, shape in shapes.items():
        parser = FlexibleArgumentParser()
        add_cli_args(parser)
        with contextlib.redirect_stdout(io.StringIO()):   # its own report: the JSON line below carries it
            result = bench(parser.parse_args(arguments(url, model, tokenizer, shape)
                                             + (["--save-detailed"] if shape.get("detail") else [])))
        out[name] = {k: result.get(k) for k in KEEP}
        if shape.get("detail"):
            out[name]["ttfts_ms"] = [t * 1000 for _, t in sorted(zip(result["start_times"], result["ttfts"]))]
            with urllib.request.urlopen(url + shape["detail"], timeout=30) as r:
                out[name]["snapshot"] = json.load(r)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
