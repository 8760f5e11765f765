"""Docstrings, comments and docs name files that exist: a path like `jobs/engine/sql.py`
(a glob such as `sql_*.py` must match one), and every `name.py` in a package's map
(its `__init__.py` docstring) is a module of that package."""

import ast
import importlib.util
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = {".py", ".md", ".sh", ".tpl", ".txt", ".ini", ".toml"}
# A relative path with at least one folder; not the tail of a URL or of a longer path.
PATH_REFERENCE = re.compile(r"(?<![\w/.:-])([A-Za-z_][\w-]*(?:/[\w*.-]+)+\.(?:py|sh|tpl|txt|json|md|mjs|ini|toml))\b")
MAP_ENTRY = re.compile(r"^\s+([a-z_][a-z0-9_]*\.py)\b", re.MULTILINE)


def tracked_text_files():
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [
        ROOT / name
        for name in listed.splitlines()
        if Path(name).suffix in TEXT_SUFFIXES or Path(name).name.startswith("Procfile")
    ]


def exists(reference, mentioned_in):
    for base in (ROOT, mentioned_in.parent):
        if any(base.glob(reference)):
            return True
    # A third-party package's own file (e.g. huey/consumer.py).
    spec = importlib.util.find_spec(reference.split("/")[0])
    return bool(spec and spec.submodule_search_locations) and any(
        Path(next(iter(spec.submodule_search_locations))).parent.glob(reference)
    )


def test_every_file_path_mentioned_in_the_tree_exists():
    missing = [
        f"{path.relative_to(ROOT)}: {reference}"
        for path in tracked_text_files()
        for reference in PATH_REFERENCE.findall(path.read_text(encoding="utf-8"))
        if not exists(reference, path)
    ]
    assert missing == []


def test_every_module_in_a_package_map_exists():
    missing = []
    for init in ROOT.glob("**/__init__.py"):
        if ".venv" in init.parts or "node_modules" in init.parts:
            continue
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        for module in MAP_ENTRY.findall(docstring):
            if not (init.parent / module).exists():
                missing.append(f"{init.relative_to(ROOT)}: {module}")
    assert missing == []
