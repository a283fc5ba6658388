"""Which cells are flagged `special` (issue 20): only a cell whose whole output is one special token of the tokenizer
(<|im_end|>, ...). A speculative cell that writes several tokens ending in EOS wrote text: it is not special, its
`token` is that text (without the EOS) and its `stop` says the request ended at EOS."""
import json

import pytest

from engine import Engine, parse_workload
from tests.kit import ROOT

DEMOS = ROOT / "demos"


@pytest.mark.model
def test_a_speculative_cell_of_text_ending_in_eos_is_not_special_only_a_lone_special_token_is(smol):
    engine = Engine(smol)
    run = engine.start(engine.prepare(parse_workload(json.loads((DEMOS / "spec-quote.json").read_text()))))
    run.run_to_end()
    cells = [c for lane in run.lanes.values() for r in lane.records for c in r.slots if c.token_id is not None]
    text_then_eos = [c for c in cells if c.tokens and c.tokens[-1] in smol.eos_ids]
    assert text_then_eos, "the preset no longer ends a request inside a kept proposal: the test checks nothing"
    for c in text_then_eos:
        assert not c.special and not c.to_dict().get("special"), (c.request, c.token)
        assert c.token and c.stop is not None and c.stop.value == "eos"
    for c in cells:  # a special cell is one token, and that token is special
        if c.special:
            assert c.tokens is None and c.token_id in smol.special_ids, (c.request, c.token)
    assert any(c.special for c in cells)  # the plain lane's lone <|im_end|> cells still are
