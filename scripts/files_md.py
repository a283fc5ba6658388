"""Writes docs/files.md from the tree: every file, one line each, the first sentence the file says about itself.

`python -m scripts.files_md` writes it; `--check` exits 1 when it is stale or a file says nothing about itself
(tests/test_docs.py runs the same check). What a file says: a Python module's docstring; a JS, CSS, C++ or header
file's first comment; a template's first `{# #}` or `<!-- -->` comment; a shell script's first comment after the
shebang; a demo's "description"; a Markdown file's first paragraph under its title. Files that cannot say anything
(JSON data, pictures) are described in GROUPS below, one line for the lot.
"""
import difflib
import fnmatch
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "files.md"
FOLDERS = ("engine", "app", "static", "templates", "demos", "scripts", "tests", "docs", ".ci")
TOP = ("Makefile", "README.md", "pyproject.toml", "requirements.txt", "requirements-dev.txt", ".gitignore",
       "package.json", "package-lock.json")
MAX = 180  # characters of a line's text before it is cut at a word

# data that carries no comment: one line for every file a pattern matches (listed where its first file would be)
GROUPS = {
    "demos/traces/*": "the trace slices the trace presets replay (Azure 2023 code, Mooncake conversation); "
                      "their source and licence in its README.md",
    "tests/golden/*.json": "the golden fixtures: step records and what metrics, lessons and the memory map make of "
                           "them, read by pytest and by node (`python -m tests.golden.make`, `python -m "
                           "tests.golden.lessons`)",
    "docs/*.png": "screenshots: the page (`screenshot.png`, in the README), the sweep view, the Live view, Present "
                  "mode, the memory map, the classroom sizes",
    "docs/grafana-dashboard.json": "our Grafana dashboard of the live lane's /metrics (either prefix, every engine); "
                                   "tests/app/test_openai_serve.py checks it names only what /metrics serves",
    "static/js/package.json": '`{"type": "module"}`, so node reads static/js/ as ES modules (tests/js/)',
    "package.json": "the pinned browser libraries (Socket.IO client, uPlot), copied to static/vendor/ at set-up",
    "package-lock.json": "what `npm ci` installs, pinned",
    ".gitignore": "what git leaves out: the virtualenvs, caches, node_modules/, static/vendor/, data/, artifacts/",
}

SENTENCE_END = re.compile(r"[.!?](?=\s+[A-Z`(\"]|$)")
PY_DOC = re.compile(r'\A(?:[ \t]*#[^\n]*\n|[ \t]*\n)*[ \t]*[rRuU]?("""|\'\'\')(.*?)\1', re.S)
TEMPLATE_COMMENT = re.compile(r"\A\s*(?:\{#-?(.*?)-?#\}|<!--(.*?)-->)", re.S)


def tracked() -> list[str]:
    """The files git tracks, or would track (new files not ignored), under FOLDERS and TOP, as they are on disk."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *FOLDERS, *TOP],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return sorted({p for p in out.splitlines() if (ROOT / p).is_file()})


def sentence(text: str) -> str:
    """The first sentence of the first paragraph, on one line, cut at a word past MAX characters."""
    para = " ".join(line.strip() for line in text.strip().split("\n\n")[0].splitlines())
    end = SENTENCE_END.search(para)
    para = para[:end.end()] if end else para
    if len(para) > MAX:
        para = para[:MAX].rsplit(" ", 1)[0].rstrip(",;:") + " …"
    return para


def leading(lines: list[str], mark: str) -> str:
    """The comment lines starting with `mark` at the top of `lines` (a blank line ends them)."""
    out = []
    for line in lines:
        if not line.startswith(mark):
            break
        out.append(line[len(mark):].strip())
    return "\n".join(out)


def says(path: str) -> str:
    """What the file at `path` says about itself, or "" when it says nothing."""
    text = (ROOT / path).read_text(errors="replace")
    name = path.rsplit("/", 1)[-1]
    ext = name.rsplit(".", 1)[-1] if "." in name else name
    if ext == "py":
        doc = PY_DOC.match(text)
        return sentence(doc.group(2)) if doc else ""
    if ext in ("js", "mjs", "css", "cpp", "h"):
        body = text.lstrip()
        if body.startswith("/*"):
            return sentence(re.sub(r"^\s*\*+ ?", "", body[2:body.find("*/")].lstrip("*"), flags=re.M))
        return sentence(leading(body.splitlines(), "//"))
    if ext == "html":
        comment = TEMPLATE_COMMENT.match(text)
        return sentence(comment.group(1) or comment.group(2)) if comment else ""
    if ext in ("sh", "run", "Makefile", "toml", "txt"):
        lines = text.splitlines()
        return sentence(leading(lines[1:] if lines and lines[0].startswith("#!") else lines, "#"))
    if ext == "json" and path.startswith("demos/"):
        return sentence(json.loads(text).get("description", ""))
    if ext == "md":
        body = re.sub(r"\A#[^\n]*\n", "", text.lstrip())  # the title
        paras = [p for p in body.split("\n\n") if p.strip() and not p.lstrip().startswith(("!", "#", "|"))]
        return sentence(paras[0]) if paras else ""
    return ""


def escape(text: str) -> str:
    """`<` outside code spans written so that Markdown shows it, not a tag."""
    parts = text.split("`")
    return "`".join(p if i % 2 else p.replace("<", "\\<") for i, p in enumerate(parts))


def entries(paths: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Lines by folder ("" for the top level), and the files that say nothing about themselves."""
    by_folder: dict[str, list[str]] = {}
    silent, grouped = [], set()
    for path in paths:
        folder = path.rpartition("/")[0]
        group = next((g for g in GROUPS if fnmatch.fnmatch(path, g)), None)
        if group is not None:
            if group not in grouped:
                grouped.add(group)
                by_folder.setdefault(group.rpartition("/")[0], []).append(f"- `{group}`: {GROUPS[group]}")
            continue
        text = says(path)
        if not text:
            if path.endswith("__init__.py") and not (ROOT / path).read_text().strip():
                continue  # an empty package marker says nothing and needs to say nothing
            silent.append(path)
            continue
        by_folder.setdefault(folder, []).append(f"- `{path}`: {escape(text)}")
    return by_folder, silent


def folder_order(folder: str) -> tuple:
    """The code folders first, in FOLDERS' order, then docs/, then the top level and .ci/."""
    top = folder.split("/")[0]
    rank = FOLDERS.index(top) if top in FOLDERS else FOLDERS.index(".ci") - 0.5
    return (rank, folder)


def render(paths: list[str]) -> tuple[str, list[str]]:
    by_folder, silent = entries(paths)
    out = ["# Files", "",
           "Every file, one line each: the first sentence it says about itself (its docstring or first comment).",
           "Written by `python -m scripts.files_md`; do not edit: tests/test_docs.py fails when it is stale.", ""]
    for folder in sorted(by_folder, key=folder_order):
        out += [f"## {folder + '/' if folder else 'The top level'}", "", *by_folder[folder], ""]
    return "\n".join(out), silent


def changes(old: str, new: str, limit: int = 40) -> str:
    """The lines that differ between the file map on disk and the tree's, as `-` and `+` lines."""
    diff = [line for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    return "\n".join(diff[:limit] + ([f"... and {len(diff) - limit} more"] if len(diff) > limit else []))


def main(argv: list[str]) -> int:
    text, silent = render(tracked())
    if silent:
        print("these files say nothing about themselves (give each a docstring or first comment line):\n  "
              + "\n  ".join(silent), file=sys.stderr)
    if "--check" in argv:
        old = OUT.read_text() if OUT.exists() else ""
        stale = old != text
        if stale:
            print(f"{OUT.relative_to(ROOT)} is stale: run python -m scripts.files_md\n{changes(old, text)}",
                  file=sys.stderr)
        return 1 if stale or silent else 0
    OUT.write_text(text)
    return 1 if silent else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
