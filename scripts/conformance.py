"""OpenAI conformance: vLLM's own client-visible behaviours, checked against a running server with the official
`openai` client; prints each behaviour's pass / fail with the reason, then "N of M".

    python -m scripts.conformance --base-url http://127.0.0.1:5000          # the figure
    python -m scripts.conformance --base-url ... --json > conformance.json  # for machines
    python -m scripts.conformance --base-url ... --only chat.tool           # the behaviours whose id starts so

The behaviours are in scripts/conformance_serving.py, conformance_completions.py and conformance_chat.py (each names
the vLLM test it restates); `run(ctx)` is what tests/app/test_conformance.py calls in-process. Every request has a
timeout, so a server that hangs fails a behaviour instead of the harness. This module knows the harness, nothing of
the server's code.
"""
import argparse
import json
import sys
import time
import traceback

import httpx2 as httpx
import openai

from scripts import conformance_serving  # noqa: F401  (each registers its behaviours, in this order)
from scripts import conformance_completions  # noqa: F401
from scripts import conformance_chat  # noqa: F401
from scripts.conformance_checks import BEHAVIOURS, Ctx, Fail, SkipCheck

TIMEOUT_S = 60   # a request's; a behaviour makes a few


def run(ctx: Ctx, only: str = "") -> list[dict]:
    """Every behaviour (whose id starts with `only`): {id, behaviour, source, result: pass|fail|skip, reason, s}."""
    results = []
    for bid, text, source, check in BEHAVIOURS:
        if not bid.startswith(only):
            continue
        start, result, reason = time.monotonic(), "pass", ""
        try:
            check(ctx)
        except SkipCheck as e:
            result, reason = "skip", str(e)
        except (Fail, AssertionError) as e:
            result, reason = "fail", str(e) or "assertion"
        except openai.APIStatusError as e:
            result, reason = "fail", f"HTTP {e.status_code}: {e.message}"
        except Exception as e:   # a client-side parse error, a timeout, a KeyError on a missing field: all fails
            result, reason = "fail", f"{type(e).__name__}: {e}" + ("" if str(e) else traceback.format_exc(limit=1))
        results.append({"id": bid, "behaviour": text, "source": source, "result": result, "reason": reason[:300],
                        "s": round(time.monotonic() - start, 2)})
    return results


def figure(results: list[dict]) -> tuple[int, int]:
    """(passed, counted): skipped behaviours count neither way."""
    counted = [r for r in results if r["result"] != "skip"]
    return sum(r["result"] == "pass" for r in counted), len(counted)


def connect(base_url: str, api_key: str, wait_s: float) -> Ctx:
    """The harness's clients, once GET /health answers 200 (at most `wait_s` seconds: a loading model is a 503)."""
    base = base_url.rstrip("/").removesuffix("/v1")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"{base}/health did not answer 200 within {wait_s:.0f} s")
        time.sleep(1)
    client = openai.OpenAI(base_url=f"{base}/v1", api_key=api_key, max_retries=0, timeout=TIMEOUT_S)
    http = httpx.Client(base_url=base, timeout=TIMEOUT_S, headers={"Authorization": f"Bearer {api_key}"})
    return Ctx(client=client, http=http, model=client.models.list().data[0].id)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default="http://127.0.0.1:5000", help="the server (with or without /v1)")
    ap.add_argument("--api-key", default="unused", help="sent as the bearer token")
    ap.add_argument("--only", default="", help="run the behaviours whose id starts with this")
    ap.add_argument("--wait", type=float, default=300, help="seconds to wait for GET /health to answer 200")
    ap.add_argument("--json", action="store_true", help="print the results as one JSON object")
    args = ap.parse_args(argv)
    ctx = connect(args.base_url, args.api_key, args.wait)
    start = time.monotonic()
    results = run(ctx, args.only)
    passed, counted = figure(results)
    if args.json:
        print(json.dumps({"model": ctx.model, "passed": passed, "counted": counted, "seconds":
                          round(time.monotonic() - start, 1), "behaviours": results}, indent=1))
    else:
        for r in results:
            print(f"{r['result']:4}  {r['id']:36} {r['s']:6.1f} s  {r['reason'] if r['result'] != 'pass' else ''}")
        print(f"{passed} of {counted} behaviours pass ({ctx.model}, {time.monotonic() - start:.0f} s)")
    return 0 if passed == counted else 1


if __name__ == "__main__":
    sys.exit(main())
