"""The page's vocabulary (static/js/vocab.js) says exactly what the engine and the protocol say: slot states,
stop reasons, lanes, policies and socket event names, as identical strings (the sweep page's own events live in
static/js/sweep-state.js). No browser needed."""
import re
from pathlib import Path

from engine.admission import ORDERS
from engine.policies import POLICIES
from engine.step import SlotState, StopReason

JS = Path(__file__).resolve().parent.parent / "static" / "js"
VOCAB = (JS / "vocab.js").read_text()


def frozen(name: str, source: str = VOCAB) -> dict[str, str]:
    """The KEY: "value" pairs of `export const NAME = Object.freeze({...})` in vocab.js (or `source`)."""
    body = re.search(rf"export const {name} = Object\.freeze\(\{{(.*?)\}}\);", source, re.S)
    assert body, f"no frozen {name}"
    return dict(re.findall(r'(\w+):\s*"([^"]*)"', body.group(1)))


def test_slot_states_and_stop_reasons_match_the_engine_enums():
    assert frozen("SlotState") == {s.name: s.value for s in SlotState}
    assert frozen("StopReason") == {s.name: s.value for s in StopReason}


def test_lanes_and_policies_match_the_engine_registries():
    assert set(frozen("Lane").values()) == set(POLICIES)
    assert set(frozen("Policy").values()) == set(ORDERS)


def test_socket_event_names_are_the_readme_protocol():
    readme = (Path(__file__).resolve().parent.parent / "docs" / "protocol.md").read_text()
    documented = set(re.findall(r"\| (?:server → client|client → server) \| `(\w+)` \|", readme))
    page = set(frozen("ServerEvent").values()) | set(frozen("ClientEvent").values())
    sweep = JS / "sweep-state.js"  # the sweep view's events, where that page defines them
    if sweep.exists():
        page |= set(frozen("SweepEvent", sweep.read_text()).values()) | set(frozen("SweepClientEvent", sweep.read_text()).values())
    assert page == documented
