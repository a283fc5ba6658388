"""scripts/ttft_parts.py splits each live request's TTFT into the waits and the steps its records show."""
from scripts.ttft_parts import ttft_parts


def cell(request):
    return {"request": request}


def test_ttft_parts_splits_the_wait_for_the_running_step_the_prefill_and_the_http_path():
    # a decode step of A runs 0-40 ms; B arrives at 10 and C at 60 during the fused step 40-160 (A + B's prompt);
    # C's prompt fills the fused step 160-280; A and B decode 280-320
    records = [{"start_ms": 0, "ms": 40, "forward": "decode", "slots": [cell("A"), cell(None)]},
               {"start_ms": 40, "ms": 120, "forward": "fused", "slots": [cell("A"), cell("B")]},
               {"start_ms": 160, "ms": 120, "forward": "fused", "slots": [cell("A"), cell("B"), cell("C")]},
               {"start_ms": 280, "ms": 40, "forward": "decode", "slots": [cell("A"), cell("B")]}]
    requests = [{"id": "A", "arrival_ms": -500, "admitted_ms": -400, "first_token_ms": -300},
                {"id": "B", "arrival_ms": 10, "admitted_ms": 40, "first_token_ms": 160},
                {"id": "C", "arrival_ms": 60, "admitted_ms": 160, "first_token_ms": 280}]
    out = ttft_parts({"records": records, "requests": requests}, [158.0, 230.0])   # B's and C's, as the client saw
    b, c = out["requests"]
    assert (b["id"], b["wait_step"], b["wait_more"], b["prefill"], b["prefill_steps"], b["http"]) == \
        ("B", 30, 0, 120, 1, 8)
    assert (c["id"], c["wait_step"], c["wait_more"], c["prefill"], c["lane_ttft"], c["http"]) == \
        ("C", 100, 0, 120, 220, 10)
    assert out["p50"]["prefill"] == 120 and out["p50"]["client_ttft"] == 194
    assert out["steps"] == {"decode 1": [1, 40], "decode 2": [1, 40], "fused 2": [1, 120], "fused 3": [1, 120]}
