"""The page's vocabulary (static/js/core/vocab.js) says exactly what the engine and the protocol say: slot states,
stop reasons and socket event names, as identical strings, and names no policy or admission order (the sweep page's own events live in
static/js/sweep/state.js). No browser needed."""
import dataclasses
import re
from pathlib import Path

from engine.admission import ORDERS
from engine.policies import POLICIES
from engine.request import RequestSpec
from engine.step import SlotState, StopReason

JS = Path(__file__).resolve().parent.parent / "static" / "js"
VOCAB = (JS / "core" / "vocab.js").read_text()


def frozen(name: str, source: str = VOCAB) -> dict[str, str]:
    """The KEY: "value" pairs of `export const NAME = Object.freeze({...})` in vocab.js (or `source`)."""
    body = re.search(rf"export const {name} = Object\.freeze\(\{{(.*?)\}}\);", source, re.S)
    assert body, f"no frozen {name}"
    return dict(re.findall(r'(\w+):\s*"([^"]*)"', body.group(1)))


def test_slot_states_and_stop_reasons_match_the_engine_enums():
    assert frozen("SlotState") == {s.name: s.value for s in SlotState}
    assert frozen("StopReason") == {s.name: s.value for s in StopReason}


def test_no_page_module_names_a_policy_or_an_admission_order():
    """The page reads what a policy or an order is from catalog.js (the engine's declarations) and never compares
    names, so adding one is a change to the engine alone. A name that is also a request field ("priority") may
    appear as that field."""
    fields = {f.name for f in dataclasses.fields(RequestSpec)}
    names = sorted((set(POLICIES) | set(ORDERS)) - fields)
    quoted = re.compile(r"""["'`](%s)["'`]""" % "|".join(map(re.escape, names)))
    found = []
    for path in sorted(JS.rglob("*.js")):
        if path.name == "catalog.js":
            continue
        code = re.sub(r"/\*.*?\*/|//[^\n]*", "", path.read_text(), flags=re.S)  # comments may name them
        found += [f"{path.relative_to(JS)}: {m.group(0)}" for m in quoted.finditer(code)]
    assert names and not found


def test_socket_event_names_are_the_readme_protocol():
    readme = (Path(__file__).resolve().parent.parent / "docs" / "protocol.md").read_text()
    documented = set(re.findall(r"\| (?:server → client|client → server) \| `(\w+)` \|", readme))
    page = set(frozen("ServerEvent").values()) | set(frozen("ClientEvent").values())
    sweep = JS / "sweep" / "state.js"  # the sweep view's events, where that page defines them
    if sweep.exists():
        page |= set(frozen("SweepEvent", sweep.read_text()).values()) | set(frozen("SweepClientEvent", sweep.read_text()).values())
    assert page == documented
