"""The page's vocabulary (static/js/core/vocab.js) says exactly what the engine and the protocol say: slot states,
forward kinds and stop reasons are the catalog's (static/js/core/catalog.js, generated from the engine's enums),
re-exported and never written again; socket event names are the protocol's, as identical strings; and no page module
names a policy or admission order (the sweep page's own events live in static/js/sweep/state.js). No browser needed."""
import dataclasses
import re

from engine.report import catalog
from engine.admission import ORDERS
from engine.sched.policies import POLICIES
from engine.request import RequestSpec
from engine.step import Forward, SlotState, StopReason
from tests.kit import ROOT

JS = ROOT / "static" / "js"
VOCAB = (JS / "core" / "vocab.js").read_text()


def frozen(name: str, source: str = VOCAB) -> dict[str, str]:
    """The KEY: "value" pairs of `export const NAME = Object.freeze({...})` in vocab.js (or `source`)."""
    body = re.search(rf"export const {name} = Object\.freeze\(\{{(.*?)\}}\);", source, re.S)
    assert body, f"no frozen {name}"
    return dict(re.findall(r'(\w+):\s*"([^"]*)"', body.group(1)))


def clause_names(clause: str | None) -> set[str]:
    """The names in an `import { ... }` or `export { ... }` clause (`a as b` counts as b)."""
    return {n.split(" as ")[-1].strip() for n in (clause or "").split(",") if n.strip()}


def test_vocab_re_exports_the_catalogs_enums_and_writes_none_by_hand():
    """The engine's enums reach the page once, through the generated catalog: vocab.js imports each from catalog.js
    and re-exports it, and defines none itself. tests/js/core/vocab.test.mjs checks they are the very same objects."""
    data = catalog.catalog()
    enums = [name for name in data if name[0].isupper() and not name.isupper()]  # the catalog's CamelCase exports
    assert {"SlotState", "Forward", "StopReason"} <= set(enums)
    imported = re.search(r'import \{([^}]*)\} from "\./catalog\.js";', VOCAB)
    exported = re.findall(r"export \{([^}]*)\}", VOCAB)
    for name in enums:
        assert name in clause_names(imported and imported.group(1)), f"vocab.js does not import {name} from catalog.js"
        assert any(name in clause_names(clause) for clause in exported), f"vocab.js does not re-export {name}"
        assert not re.search(rf"\b(?:const|let|var|function|class)\s+{name}\b", VOCAB), f"vocab.js writes {name} by hand"


def test_slot_states_and_stop_reasons_match_the_engine_enums():
    """What vocab.js re-exports holds the engine's strings: every member of the enums is in catalog.js as written."""
    text = catalog.PATH.read_text()
    data = catalog.catalog()
    for enum in (SlotState, Forward, StopReason):
        assert data[enum.__name__] == {m.name: m.value for m in enum}
        for m in enum:
            assert f'"{m.name}": "{m.value}",' in text, (enum.__name__, m)


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
    readme = (ROOT / "docs" / "protocol.md").read_text()
    documented = set(re.findall(r"\| (?:server → client|client → server) \| `(\w+)` \|", readme))
    page = set(frozen("ServerEvent").values()) | set(frozen("ClientEvent").values())
    sweep = JS / "sweep" / "state.js"  # the sweep view's events, where that page defines them
    if sweep.exists():
        page |= set(frozen("SweepEvent", sweep.read_text()).values()) | set(frozen("SweepClientEvent", sweep.read_text()).values())
    assert page == documented
