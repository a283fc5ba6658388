"""Drive the OpenAI-compatible endpoint as a client would, at Poisson (or Gamma) request rates, with the official
`openai` package, and report what `vllm bench serve` reports per rate (a benchmark, not a test: it asserts nothing).

    .venv/bin/python scripts/serve_bench.py --rates 0.5 1 2 --requests 24 --max-tokens 32
    .venv/bin/python scripts/serve_bench.py --url http://127.0.0.1:5000 --rates 1 --workload demos/poisson.json --json

Without `--url` it starts `python -m app` itself on a free port with a temporary data folder, waits for
GET /healthz to say ready, and stops it afterwards. Every request is a streaming chat completion (one user
message, temperature 0, `ignore_eos` through `extra_body` unless `--no-ignore-eos`, usage chunk asked for), sent
from its own thread at its arrival time: arrivals are drawn by engine.workload.arrivals (the first at 0 s, then gaps from a
Gamma distribution of shape `--burstiness` and mean 1 / rate; 1 = Poisson), seeded, so a run repeats its schedule.

Per request, on the client's clock: TTFT to the first chunk with non-empty content, ITLs between content chunks,
e2e to the end of the stream, TPOT = (e2e - TTFT) / (completion_tokens - 1) with the tokens from the usage chunk.
Per rate, under vLLM's names: completed, failed, duration (first send to last stream's end), request_throughput,
output_throughput, request_goodput (requests meeting `--slo-ttft-ms` and `--slo-tpot-ms`), and mean / median /
p95 / p99 of ttft_ms, tpot_ms, itl_ms, e2el_ms (median and percentiles nearest-rank, engine.report.metrics.percentile).
A content chunk may hold more than one token (text held back while it may become a stop string), so ITLs are
gaps between chunks, as every client-side benchmark measures them.

From Python:  `serve_bench(url=None, rates=[1, 2], requests=24, max_tokens=32)` returns the same dict as --json.
"""
import argparse
import json
import os
import random
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from statistics import fmean

ROOT = Path(__file__).resolve().parent.parent

from engine.workload.arrivals import arrival_times_ms, generate_requests  # noqa: E402  (no torch: a pure client)
from engine.report.metrics import percentile  # noqa: E402
from scripts.chat_prompts import CHAT_PROMPTS as PROMPTS  # noqa: E402  (the built-in mix, as bench.py's)
from tests.kit.server import get_health, live_server  # noqa: E402

DEFAULT_MAX_TOKENS = 32
T0 = time.perf_counter()


def log(message: str) -> None:
    print(f"[serve_bench {time.perf_counter() - T0:6.1f}s] {message}", file=sys.stderr, flush=True)


# -- the server ---------------------------------------------------------------------------------------------
def get_json(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def _answers(url: str) -> bool:
    """Whether `url` answers 200: another engine's readiness probe (vLLM's /health), which has no /healthz."""
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@contextmanager
def server(url: str | None = None, args: list[str] | None = None, ready_timeout_s: float = 300.0):
    """The base URL of a ready server: `url` as given (once its /healthz says ready), or a `python -m app` started
    here on a free port with a temporary data folder (tests/kit/server.py), stopped on exit."""
    if not url:
        with live_server(*(args or []), timeout=ready_timeout_s) as base:
            yield str(base)
        return
    deadline = time.monotonic() + ready_timeout_s
    while not ((get_health(url.rstrip("/")) or {}).get("ready") or _answers(url.rstrip("/") + "/health")):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the server at {url} was not ready after {ready_timeout_s:.0f} s")
        time.sleep(0.5)
    yield url.rstrip("/")


# -- the requests -------------------------------------------------------------------------------------------
def load_mix(n: int, max_tokens: int | None, workload: str | None, seed: int) -> list[dict]:
    """n requests {"prompt", "max_tokens"}: the built-in prompts in turn, or a workload JSON's requests (its
    `generate` section drawn with n requests; a request list cycled to n). `max_tokens` overrides the lengths."""
    if workload is None:
        reqs = [{"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": DEFAULT_MAX_TOKENS} for i in range(n)]
    else:
        obj = json.loads(Path(workload).read_text())
        if isinstance(obj.get("generate"), dict):
            source = generate_requests({**obj["generate"], "n": n, "seed": obj["generate"].get("seed", seed)})
        else:
            source = obj.get("requests") or []
        if not source:
            raise SystemExit(f"{workload}: no requests (give a `requests` list or a `generate` section)")
        reqs = [{"prompt": r["prompt"], "max_tokens": int(r.get("max_new_tokens", DEFAULT_MAX_TOKENS))}
                for r in (source[i % len(source)] for i in range(n))]
    if max_tokens is not None:
        reqs = [{**r, "max_tokens": max_tokens} for r in reqs]
    return reqs


def one_request(client, model: str, prompt: str, max_tokens: int, ignore_eos: bool, timeout_s: float) -> dict:
    """Send one streaming chat completion and time it on the client's clock (perf_counter seconds)."""
    out = {"ok": False, "error": None, "send": time.perf_counter(), "chunks": [], "tokens": None, "prompt_tokens": None,
           "finish_reason": None, "text": "", "end": None}
    try:
        stream = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0,
            stream=True, stream_options={"include_usage": True}, timeout=timeout_s,
            extra_body={"ignore_eos": True} if ignore_eos else None)
        text = []
        for chunk in stream:
            now = time.perf_counter()
            if chunk.choices:
                choice = chunk.choices[0]
                if choice.delta is not None and choice.delta.content:
                    out["chunks"].append(now)
                    text.append(choice.delta.content)
                if choice.finish_reason:
                    out["finish_reason"] = choice.finish_reason
            if chunk.usage is not None:
                out["tokens"], out["prompt_tokens"] = chunk.usage.completion_tokens, chunk.usage.prompt_tokens
        out["end"] = time.perf_counter()
        out["text"] = "".join(text)
        out["ok"] = out["tokens"] is not None
        if not out["ok"]:
            out["error"] = "no usage chunk in the stream"
    except Exception as e:  # noqa: BLE001 - a failed request is counted, not fatal
        out["end"] = time.perf_counter()
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def request_figures(r: dict) -> dict:
    """One request's ttft/itl/tpot/e2el in ms (None where not defined)."""
    ttft = (r["chunks"][0] - r["send"]) * 1000 if r["chunks"] else None
    e2el = (r["end"] - r["send"]) * 1000
    itls = [(b - a) * 1000 for a, b in zip(r["chunks"], r["chunks"][1:])]
    tokens = r["tokens"] or 0
    tpot = (e2el - ttft) / (tokens - 1) if ttft is not None and tokens > 1 else None
    return {"ttft_ms": ttft, "itl_ms": itls, "tpot_ms": tpot, "e2el_ms": e2el}


def summarize(results: list[dict], duration: float, slo_ttft_ms: float | None, slo_tpot_ms: float | None) -> dict:
    """vLLM's names for one rate's results."""
    done = [r for r in results if r["ok"]]
    figs = [request_figures(r) for r in done]
    tokens = sum(r["tokens"] for r in done)
    good = [f for f in figs if (slo_ttft_ms is None or (f["ttft_ms"] is not None and f["ttft_ms"] <= slo_ttft_ms))
            and (slo_tpot_ms is None or f["tpot_ms"] is None or f["tpot_ms"] <= slo_tpot_ms)]
    out = {"completed": len(done), "failed": len(results) - len(done), "duration": duration,
           "total_input_tokens": sum(r["prompt_tokens"] or 0 for r in done), "total_output_tokens": tokens,
           "request_throughput": len(done) / duration if duration else None,
           "output_throughput": tokens / duration if duration else None,
           "request_goodput": len(good) / duration if duration else None}
    series = {"ttft": [f["ttft_ms"] for f in figs if f["ttft_ms"] is not None],
              "tpot": [f["tpot_ms"] for f in figs if f["tpot_ms"] is not None],
              "itl": [x for f in figs for x in f["itl_ms"]],
              "e2el": [f["e2el_ms"] for f in figs]}
    for name, values in series.items():
        out[f"mean_{name}_ms"] = fmean(values) if values else None
        out[f"median_{name}_ms"] = percentile(values, 50)
        out[f"p95_{name}_ms"] = percentile(values, 95)
        out[f"p99_{name}_ms"] = percentile(values, 99)
    errors = sorted({r["error"] for r in results if r["error"]})
    if errors:
        out["errors"] = errors[:5]
    return out


def run_rate(client, model: str, mix: list[dict], rate: float, burstiness: float = 1.0, seed: int = 0,
             ignore_eos: bool = True, slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None,
             timeout_s: float = 600.0) -> tuple[dict, list[dict]]:
    """Send `mix` at its drawn arrival times (rate inf: all at once), one thread per request; (figures, results)."""
    n = len(mix)
    times = [0.0] * n if rate == float("inf") else [t / 1000 for t in
                                                    arrival_times_ms(n, rate, burstiness, random.Random(seed))]
    results: list[dict | None] = [None] * n

    def worker(i: int) -> None:
        results[i] = one_request(client, model, mix[i]["prompt"], mix[i]["max_tokens"], ignore_eos, timeout_s)

    threads = []
    t0 = time.perf_counter()
    for i, at in enumerate(times):
        wait = t0 + at - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        t = threading.Thread(target=worker, args=(i,), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    duration = max(r["end"] for r in results) - t0
    figures = summarize(results, duration, slo_ttft_ms, slo_tpot_ms)
    figures = {"rate": rate, "burstiness": burstiness,
               "offered_rate": (n - 1) / times[-1] if n > 1 and times[-1] > 0 else None, **figures}
    return figures, results


def make_client(base: str):
    """The official client on `base` (its default pool allows 1000 connections: enough for every thread)."""
    import openai
    return openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)


def serve_bench(url: str | None = None, rates=(0.5, 1, 2), requests: int = 24, max_tokens: int | None = None,
                workload: str | None = None, burstiness: float = 1.0, seed: int = 0, ignore_eos: bool = True,
                slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None, warmup: int = 1,
                server_args: list[str] | None = None) -> dict:
    """Run the mix at every rate, one rate after another, against `url` (or a server started here); one dict."""
    mix = load_mix(requests, max_tokens, workload, seed)
    load_before = os.getloadavg()[0]
    with server(url, server_args) as base:
        client = make_client(base)
        model = client.models.list().data[0].id
        for _ in range(warmup):  # one-off costs (the live lane's first steps) out of the figures
            one_request(client, model, mix[0]["prompt"], min(8, mix[0]["max_tokens"]), ignore_eos, 120)
        points = []
        for rate in rates:
            figures, _ = run_rate(client, model, mix, float(rate), burstiness, seed, ignore_eos, slo_ttft_ms,
                                  slo_tpot_ms)
            log(f"rate {rate:g}/s: {figures['completed']} done in {figures['duration']:.1f} s, "
                f"{figures['output_throughput']:.1f} tok/s, median TTFT {figures['median_ttft_ms'] or 0:.0f} ms")
            points.append(figures)
        metrics_text = None
        try:
            with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
                metrics_text = r.read().decode()
        except OSError:
            pass
    return {"url": url or "started here", "model": model, "requests": requests,
            "max_tokens": max_tokens if max_tokens is not None else
            (DEFAULT_MAX_TOKENS if workload is None else "workload"),
            "workload": workload, "burstiness": burstiness, "seed": seed, "ignore_eos": ignore_eos,
            "slo_ttft_ms": slo_ttft_ms, "slo_tpot_ms": slo_tpot_ms, "points": points,
            "server_metrics": prom_summary(metrics_text),
            "meta": {"load_avg_before": load_before, "load_avg_after": os.getloadavg()[0], "cpus": os.cpu_count()}}


def prom_summary(text: str | None) -> dict | None:
    """The server's own counters (samples whose names end in _total, _count or _sum, summed over their labels:
    model_name, finished_reason), if any."""
    if not text:
        return None
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        sample, _, value = line.rpartition(" ")
        name = sample.partition("{")[0]
        if name.endswith(("_total", "_count", "_sum")):
            try:
                out[name] = out.get(name, 0.0) + float(value)
            except ValueError:
                pass
    return out


def format_table(result: dict) -> str:
    def f(v, fmt=".0f"):
        return "-" if v is None else format(v, fmt)

    head = (f"{'rate/s':>6} {'drawn':>5} {'done':>4} {'fail':>4} {'dur s':>6} {'req/s':>5} {'tok/s':>6} {'good/s':>6} "
            f"{'TTFT mean':>9} {'p50':>5} {'p95':>5} {'p99':>5} {'TPOT mean':>9} {'p50':>4} {'p95':>4} {'p99':>4} "
            f"{'ITL mean':>8} {'p50':>4} {'p95':>4} {'p99':>4} {'E2E mean':>8} {'p50':>5} {'p95':>5} {'p99':>5}")
    lines = [f"serve_bench - {result['model']} ({result['url']}), {result['requests']} requests per rate, "
             f"max_tokens {result['max_tokens']}, times in ms", "", head, "-" * len(head)]
    for p in result["points"]:
        lines.append(
            f"{p['rate']:>6g} {f(p['offered_rate'], '.2f'):>5} {p['completed']:>4} {p['failed']:>4} "
            f"{p['duration']:>6.1f} {f(p['request_throughput'], '.2f'):>5} {f(p['output_throughput'], '.1f'):>6} "
            f"{f(p['request_goodput'], '.2f'):>6} "
            + " ".join(f"{f(p[f'mean_{k}_ms']):>{w}} {f(p[f'median_{k}_ms']):>{v}} {f(p[f'p95_{k}_ms']):>{v}} "
                       f"{f(p[f'p99_{k}_ms']):>{v}}" for k, w, v in (("ttft", 9, 5), ("tpot", 9, 4), ("itl", 8, 4),
                                                                     ("e2el", 8, 5))))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", help="a running server's base URL (default: start `python -m app` here and stop it after)")
    p.add_argument("--rates", type=float, nargs="+", default=[0.5, 1, 2], help="requests per second, one run each")
    p.add_argument("--requests", type=int, default=24, help="requests per rate (default 24)")
    p.add_argument("--max-tokens", type=int, help=f"output tokens per request (default {DEFAULT_MAX_TOKENS}, or the "
                                                  "workload's lengths)")
    p.add_argument("--workload", help="a workload JSON (requests or a `generate` section) for prompts and lengths")
    p.add_argument("--burstiness", type=float, default=1.0, help="Gamma shape of the arrivals (1 = Poisson)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-ignore-eos", action="store_true", help="let answers stop at EOS (default: ignore_eos)")
    p.add_argument("--slo-ttft-ms", type=float)
    p.add_argument("--slo-tpot-ms", type=float)
    p.add_argument("--warmup", type=int, default=1, help="untimed requests before the first rate (default 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = p.parse_args(argv)
    if not all(r > 0 for r in args.rates) or args.requests < 1 or args.burstiness <= 0:
        p.error("--rates and --burstiness must be above 0, --requests at least 1")
    result = serve_bench(args.url, args.rates, args.requests, args.max_tokens, args.workload, args.burstiness,
                         args.seed, not args.no_ignore_eos, args.slo_ttft_ms, args.slo_tpot_ms, args.warmup)
    print(json.dumps(result, indent=1) if args.json else format_table(result))
    return result


if __name__ == "__main__":
    main()
