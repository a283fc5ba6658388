"""The refusal of a step arrival speaks the page's step numbers (from 1) as well as the field's (from 0)."""
import pytest

from engine.limits import Limits, WorkloadError
from engine.workload.workload import parse_workload


def _refusal(arrival) -> WorkloadError:
    workload = {"name": "w", "requests": [{"id": "A", "prompt": "Hi", "max_new_tokens": 2, "arrival": arrival}]}
    with pytest.raises(WorkloadError) as caught:
        parse_workload(workload, Limits(max_arrival=20))
    return caught.value


def test_an_arrival_past_the_last_step_names_it_as_the_page_counts_steps():
    e = _refusal(25)
    assert e.field == "requests[0].arrival"
    assert "0 to 20" in str(e) and "got 25" in str(e)           # the field's own numbers, as before
    assert "arrival 25 (step 26) is past the last step 21" in str(e)


def test_a_negative_arrival_says_where_steps_start():
    e = _refusal(-1)
    assert "0 to 20" in str(e) and "arrival 0 is step 1" in str(e)


def test_the_last_arrival_is_accepted_and_a_float_is_refused_as_before():
    workload = {"name": "w", "requests": [{"id": "A", "prompt": "Hi", "max_new_tokens": 2, "arrival": 20}]}
    assert parse_workload(workload, Limits(max_arrival=20)).requests[0].arrival == 20
    with pytest.raises(WorkloadError, match="integer"):
        parse_workload({**workload, "requests": [{**workload["requests"][0], "arrival": 2.5}]},
                       Limits(max_arrival=20))
