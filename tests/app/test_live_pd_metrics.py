"""/metrics of a served P/D pair (app/live/prom.py): each handed-off request's five TTFT parts land in their own
histogram, in seconds, under vLLM-style names with the server's prefix, and the copied bytes in a counter; the parts'
sums add up to the TTFT the client saw. No model: the numbers are a hand-off's as engine/live_pd.py reports it."""
import re

from app.live.prom import LiveMetrics

PARTS = {"prefill_queue": 12.0, "prefill": 300.0, "transfer": 4.5, "decode_queue": 20.0, "first_decode": 70.0}
FAMILY = {"prefill_queue": "pd_prefill_queue", "prefill": "pd_prefill", "transfer": "pd_kv_transfer",
          "decode_queue": "pd_decode_queue", "first_decode": "pd_first_decode"}


def sample(text: str, name: str) -> float:
    return float(re.search(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.M).group(1))


def test_a_hand_offs_five_ttft_parts_and_bytes_are_served_as_histograms_and_a_counter():
    metrics = LiveMetrics("vllm", engine="0")
    metrics.handed_off(PARTS, 3 * 737280)
    metrics.handed_off({**PARTS, "decode_queue": 80.0}, 737280)
    text = metrics.exposition().decode()
    for part, family in FAMILY.items():
        assert sample(text, f"vllm:{family}_time_seconds_count") == 2
    assert sample(text, "vllm:pd_prefill_time_seconds_sum") == 0.6
    assert sample(text, "vllm:pd_decode_queue_time_seconds_sum") == 0.1
    total = sum(sample(text, f"vllm:{family}_time_seconds_sum") for family in FAMILY.values())
    assert abs(total - (sum(PARTS.values()) * 2 + 60) / 1000) < 1e-9    # the two TTFTs the clients saw
    assert sample(text, "vllm:pd_kv_transfer_bytes_total") == 4 * 737280
    assert 'le="0.005"' in text and "vllm:pd_kv_transfer_time_seconds_bucket" in text   # vLLM's TTFT edges
