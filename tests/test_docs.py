"""The text is true: docs/files.md is what scripts/files_md.py writes from the tree and every file says what it is;
every repository path a comment or doc names exists; every relative Markdown link and its anchor resolves."""
import re
import subprocess
from pathlib import Path

import pytest

from scripts import files_md

ROOT = Path(__file__).resolve().parent.parent
SCANNED = (".py", ".js", ".mjs", ".html", ".md", ".sh", ".cpp", ".h", ".css", ".toml", ".txt")
SCANNED_NAMES = ("Makefile", ".ci/run")
# a repository path: starts a word (or a URL path `/static/...`), in one of the project's folders
NAMED_PATH = re.compile(r"(?:(?<![\w./@~:-])|(?<=[\s\"'(]/))"
                        r"((?:engine|app|static|tests|scripts|docs|templates|demos)/[\w.*/-]*)")
PLACEHOLDERS = re.compile(r"\b(?:NAME|FILE|ID)\b")  # demos/NAME.json: any demo
BUILT = ("static/vendor",)  # made by set-up, not in the tree
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def tree() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the file list comes from git ls-files")
    return [p for p in out.splitlines() if (ROOT / p).is_file()]


def test_files_md_is_what_the_tree_says_and_every_file_says_what_it_is():
    text, silent = files_md.render(files_md.tracked())
    assert not silent, ("these files say nothing about themselves; give each a first docstring or comment line:\n  "
                        + "\n  ".join(silent))
    old = (ROOT / "docs" / "files.md").read_text()
    assert old == text, f"docs/files.md is stale: run python -m scripts.files_md\n{files_md.changes(old, text)}"


def named_paths() -> dict[str, list[str]]:
    """Every repository path named in the scanned files, with where it is named (file:line)."""
    named: dict[str, list[str]] = {}
    for path in tree():
        if not (path.endswith(SCANNED) or path in SCANNED_NAMES):
            continue
        for number, line in enumerate((ROOT / path).read_text(errors="replace").splitlines(), 1):
            for match in NAMED_PATH.finditer(line):
                name = match.group(1).rstrip(".-")
                if not name.startswith(BUILT):
                    named.setdefault(name, []).append(f"{path}:{number}")
    return named


def exists(name: str) -> bool:
    pattern = PLACEHOLDERS.sub("*", name)
    return any(ROOT.glob(pattern)) if "*" in pattern else (ROOT / name).exists()


def test_every_path_a_comment_or_doc_names_exists():
    missing = {name: where for name, where in named_paths().items() if not exists(name)}
    assert not missing, "paths named that do not exist (name: where it is named):\n" + "\n".join(
        f"  {name}: {', '.join(where)}" for name, where in sorted(missing.items()))


def test_the_check_sees_a_stale_path():
    """The control: the pattern finds paths where comments and docs write them, and a missing one is missing."""
    nowhere = "engine/" + "nowhere.py"  # spelled in two parts, so that this file names no missing path itself
    line = f"# see engine/sched/scheduler.py, `{nowhere}` and (tests/engine/sched/test_scheduler*.py)"
    assert [m.group(1) for m in NAMED_PATH.finditer(line)] == [
        "engine/sched/scheduler.py", nowhere, "tests/engine/sched/test_scheduler*.py"]
    assert [exists(n) for n in ("engine/sched/scheduler.py", nowhere, "tests/engine/sched/test_scheduler*.py",
                                "demos/NAME.json")] == [True, False, True, True]


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors for a Markdown file's headings: lower case, punctuation dropped, spaces as hyphens."""
    out, seen = set(), {}
    for heading in re.findall(r"^#{1,6} +(.+?) *$", re.sub(r"```.*?```", "", markdown, flags=re.S), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_every_relative_markdown_link_and_anchor_resolves():
    broken, checked = [], 0
    for path in (p for p in tree() if p.endswith(".md")):
        source = ROOT / path
        for target in MD_LINK.findall(source.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            checked += 1
            file, _, anchor = target.partition("#")
            linked = (source.parent / file).resolve() if file else source
            if not linked.exists():
                broken.append(f"{path}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text()):
                broken.append(f"{path}: {target} (no such heading)")
    assert checked > 20, f"only {checked} relative links found: the link pattern no longer sees them"
    assert not broken, "broken links:\n  " + "\n  ".join(broken)
