"""The OpenAI endpoint's `n` in a scale-out deployment over a real Redis: a request's samples go to one engine
worker (routed once), whose live lane names them as its own siblings (`L1·1` ... `L1·3`), answered whole and
streamed with an index on every chunk."""
import openai
import pytest
import requests

from tests.kit.scale import deployment
from tests.app.scale.test_scale_v1 import beats, wait_until

pytestmark = pytest.mark.redis


def test_a_requests_samples_run_on_one_worker_as_its_siblings(tmp_path):
    with deployment(tmp_path, webs=1, workers=2) as d:
        wait_until(lambda: sum(b["ready"] for b in beats(d).values()) == 2, what="two live lanes ready")
        url = d.webs[0][0]
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=30)
        whole = client.completions.create(model="simulator", prompt="Hello", max_tokens=3, n=3,
                                          extra_body={"ignore_eos": True})
        assert [c.index for c in whole.choices] == [0, 1, 2] and whole.usage.completion_tokens == 9
        chunks = list(client.chat.completions.create(model="simulator", messages=[{"role": "user", "content": "Hi"}],
                                                     max_tokens=2, n=3, stream=True, extra_body={"ignore_eos": True}))
        assert all(len(c.choices) == 1 for c in chunks)
        assert sorted(c.choices[0].index for c in chunks if c.choices[0].finish_reason) == [0, 1, 2]
        # routed per sample, the second and third would go to the other worker (fewer in flight): all six are here
        shown = requests.get(url + "/api/live", timeout=10).json()
        assert sorted(s["id"] for s in shown["requests"]) == ["L1·1", "L1·2", "L1·3", "L2·1", "L2·2", "L2·3"]
