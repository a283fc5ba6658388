"""Write tests/golden/metrics.json: step records of real engine runs and the metrics engine/report/metrics.py computes from
them, one case per kind of lane. tests/engine/report/test_metrics_golden.py (pytest) and tests/js/core/metrics.test.mjs (node) hold
lane_metrics and static/js/core/metrics.js to these answers, without a model or a browser.

    python -m tests.golden.make            # every case; the real-model ones (speculative, pd_model, pd_vllm) load it once
    python -m tests.golden.make --sim      # only the simulator's cases (keeps the stored real-model cases' records,
                                           # their expected metrics computed again from them)

Each case is {workload (a workload object with the one lane), lane, records (StepRecord.to_dict), expected}.
Run it again only when a definition changes on purpose, and say why in the commit.
"""
import json
import sys
from pathlib import Path

from engine.engine import Engine
from engine.report.metrics import REQUEST_FIELDS, lane_metrics
from engine.report.pd_metrics import PD_REQUEST_FIELDS
from engine.workload.workload import CLI_LIMITS, parse_workload

ROOT = Path(__file__).resolve().parent.parent.parent
PATH = Path(__file__).resolve().parent / "metrics.json"

# name -> (demo, lane of that demo or a lane spec, needs the real model)
CASES = {
    "static": ("mixed", "static", False),
    "dynamic": ("priorities", {"name": "dynamic", "policy": "dynamic", "max_wait": 1}, False),  # the VIP joins at step 3 (arrival 2)
    "continuous": ("mixed", "continuous", False),
    "chunked_prefill": ("long-prompt", "chunked 64", False),
    "preemption": ("memory-pressure", "continuous KV 224", False),
    "swap": ("swap-vs-recompute", "swap", False),  # its evictions are swap-outs: counted in preemptions and swaps
    "prefix_cache": ("shared-instructions", "prefix cache", False),
    "ms_arrivals_dynamic": ("arrivals", "dynamic", False),
    "ms_arrivals_continuous": ("arrivals", "continuous", False),
    "sjf": ("sjf", "sjf", False),
    "fleet": ("fleet-sessions", "cache-aware", False),  # two replicas behind cache_aware: the fleet's numbers
    "pd": ("pd-vs-colocated", "P/D 1+1", False),  # prefill and decode engines: the hand-off and the five TTFT parts
    "pd_model": ("pd-vs-colocated", "P/D 1+1", True),  # the same on SmolLM2: KV blocks copied through shared memory
    "speculative": ("spec-quote", "prompt lookup", True),
    # the real vLLM P/D pair (where `make vllm` ran): its records in our P/D lanes' shape, ExampleConnector's copies
    "pd_vllm": ("pd-vs-colocated", {"name": "vLLM P/D", "engine": "vllm",
                                    "disaggregation": {"prefill": 1, "decode": 1}}, True),
}
# An SLO a case sets that its demo does not (the arrivals, sjf and long-prompt demos carry their own): the fleet's
# pooled SLO figures held in both languages.
SLOS = {"fleet": {"ttft_ms": 250, "tpot_ms": 80}}


def expected(metrics: dict) -> dict:
    """What a case must compute: every number, and each request's documented fields."""
    out = {k: v for k, v in metrics.items() if k != "requests"}
    out["requests"] = {rid: {k: q[k] for k in REQUEST_FIELDS + (PD_REQUEST_FIELDS if "pd" in metrics else ())}
                       for rid, q in metrics["requests"].items()}
    return out


def make_case(engine: Engine, demo: str, lane, slo: dict | None = None) -> dict:
    obj = json.loads((ROOT / "demos" / f"{demo}.json").read_text())
    if isinstance(lane, str):
        lane = next((spec for spec in obj.get("lanes", [lane]) if spec == lane or (isinstance(spec, dict)
                                                                                   and spec.get("name") == lane)), lane)
    obj = {k: v for k, v in obj.items() if k not in ("lesson", "tour", "narration")} | {"lanes": [lane]}
    if slo is not None:
        obj["slo"] = slo
    workload = parse_workload(obj, CLI_LIMITS)
    run = engine.start(engine.prepare(workload))
    run.run_to_end()
    (name, records), = run.records().items()
    records = [r.to_dict() for r in records]
    return {"workload": obj, "lane": name, "records": records, "expected": expected(lane_metrics(records, workload))}


def main(argv: list[str]) -> int:
    sim_only = "--sim" in argv
    cases = json.loads(PATH.read_text()) if sim_only and PATH.exists() else {}
    sim = Engine(None, CLI_LIMITS)
    model = None
    for name, (demo, lane, real) in CASES.items():
        if real and sim_only:
            if name in cases:  # the stored records, their metrics by today's definitions
                case = cases[name]
                case["expected"] = expected(lane_metrics(case["records"], parse_workload(case["workload"], CLI_LIMITS)))
            continue
        if real and model is None:
            from engine.worker.model import load_model
            model = Engine(load_model(), CLI_LIMITS)
        cases[name] = make_case(model if real else sim, demo, lane, SLOS.get(name))
        print(f"{name}: {len(cases[name]['records'])} steps", file=sys.stderr)
    PATH.write_text(json.dumps({name: cases[name] for name in CASES if name in cases}, indent=1) + "\n")
    print(f"wrote {PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
