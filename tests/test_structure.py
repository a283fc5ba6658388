"""The house's structure: no import circle among the modules of app/, engine/ and scripts/ (function-level imports
counted); engine/'s wings import downward only (the floors below); torch imported only under engine/worker/ (and by
scripts and tests); no Python file over 300 lines."""
import ast
from pathlib import Path

import pytest

from tests.kit import ROOT

PACKAGES = ("app", "engine", "scripts")
MAX_LINES = 300
KNOWN_LONG = {"app": set(), "engine": set(), "scripts": None}  # files allowed over MAX_LINES for now: none


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `path` imports anywhere in it (module level or inside functions)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from x import y` imports x, and x.y where y is a module
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import engine.worker.model.x` names engine.worker.model
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each as a sorted list."""
    index, low, stack, on_stack, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_sees_relative_and_function_level_imports():
    edges = graph()
    assert "app.protocol" in edges["app.web.routes"]           # `from ..protocol import ...`
    assert "app.runs.worker" in edges["app.web.factory"]       # imported inside _one_process
    assert "engine.worker.sim" in edges["app.runs.tokens"]            # imported inside a function
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle(package):
    found = [group for group in cycles(graph()) if any(m.split(".")[0] == package for m in group)]
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(group) for group in found)


@pytest.mark.parametrize("package", ("app", "engine"))
def test_no_python_file_over_300_lines(package):
    long = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / package).rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert set(long) <= KNOWN_LONG[package], f"over {MAX_LINES} lines: {long}"


# engine/'s floors, lowest first: a module imports modules of its own wing or of a lower floor, never a higher one.
# The top level of engine/ holds two floors: the vocabulary (0) and the loop that ties the wings together (6).
VOCABULARY = {"engine.config", "engine.spec", "engine.structured", "engine.request", "engine.step", "engine.waits", "engine.admission", "engine.limits",
              "engine.threads"}
FLOORS = {"vocabulary": 0, "kv": 1, "sched": 2, "worker": 3, "peers": 3, "workload": 4, "report": 5, "loop": 6,
          "cli": 7}


def wing(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in FLOORS:
        return parts[1]
    if module in VOCABULARY:
        return "vocabulary"
    return "cli" if module == "engine.__main__" else "loop"


def test_every_engine_module_sits_on_a_floor():
    engine = [m for m in modules() if m.startswith("engine.")]
    assert {wing(m) for m in engine} == set(FLOORS), "a wing with no module, or a module outside the wings"
    assert wing("engine.worker.cpu.kernels") == "worker" and wing("engine.lane") == "loop"


def test_engine_wings_import_downward_only():
    upward = [f"{a} ({wing(a)}) -> {b} ({wing(b)})" for a, targets in graph().items() if a.startswith("engine")
              for b in targets if b.startswith("engine.") and wing(a) != wing(b) and FLOORS[wing(b)] > FLOORS[wing(a)]]
    assert upward == [], "imports up a floor:\n  " + "\n  ".join(upward)


def torch_importers(folder: str) -> list[str]:
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(n == "torch" or n.startswith("torch.") for n in names):
                found.append(str(path.relative_to(ROOT)))
                break
    return found


IN_VLLM = ("engine/peers/vllm_kv_meter.py", "engine/peers/vllm_bridge.py")  # run inside a vLLM process (.venv-vllm,
# its own torch), never ours: the bridge's `where` asks vLLM's workers their torch threads


def test_torch_is_imported_only_under_engine_worker():
    outside = [p for p in torch_importers("engine") + torch_importers("app")
               if not p.startswith("engine/worker/") and p not in IN_VLLM]
    assert outside == [], f"torch imported outside engine/worker/: {outside}"
    inside = torch_importers("engine/worker")
    assert "engine/worker/runner.py" in inside and "engine/worker/__init__.py" not in inside  # the door is torch-free


def test_scripts_use_only_the_public_names_of_the_test_kit():
    private = []
    for path in sorted((ROOT / "scripts").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests"):
                assert node.module.startswith("tests.kit"), f"{path.name} imports a test module: {node.module}"
                private += [f"{path.name}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert private == [], f"private names of tests/kit/ used by scripts: {private}"


# the engine's own request object and the attributes only it has: the web wing reads step records, never these
REQUEST_MODULE = "engine.request"
REQUEST_ATTRIBUTES = ("output_ids", "token_logprobs", "num_from_cache", "admitted_step", "first_token_step",
                      "finish_step", "return_step", "num_cached", "num_prefilled", "is_finished", "cache_hit_step")


def request_readers(folder: Path) -> list[str]:
    """Where a module under `folder` imports engine.request (anywhere in it), names it, or reads an attribute only
    an engine `Request` has."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        text = path.read_text()
        where = str(path.relative_to(folder.parent))
        if REQUEST_MODULE in text:
            found.append(f"{where}: names {REQUEST_MODULE}")
        for node in ast.walk(ast.parse(text, where)):
            if isinstance(node, ast.Attribute) and node.attr in REQUEST_ATTRIBUTES:
                found.append(f"{where}:{node.lineno}: reads .{node.attr}")
    return found


def test_no_engine_request_crosses_into_the_web_wing(tmp_path):
    assert request_readers(ROOT / "app") == [], "the web wing reads the step record, never an engine Request"
    # the control: the same check finds both kinds of crossing in a module that does them
    (tmp_path / "leaky.py").write_text("from engine.request import Request\n\ndef f(r):\n    return r.output_ids\n")
    assert [line.split(": ", 1)[1] for line in request_readers(tmp_path)] == ["names engine.request", "reads .output_ids"]
