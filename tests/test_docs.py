"""The documentation builds: `mkdocs build --strict` fails on a broken link, a bad
anchor or a page missing from the navigation, and the README stays a page whose
two commands are the ones the suite and CI run."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_documentation_site_builds_strictly(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    reference = (tmp_path / "site" / "api-reference" / "index.html").read_text(encoding="utf-8")
    assert "/v1/checkout" in reference and "/v1/panel/orders/{orderID}/refund" in reference


def test_the_readme_is_one_page_that_starts_with_the_two_commands_and_links_into_the_docs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    first_block = re.match(r"```\n(.*?)```", readme, re.DOTALL).group(1).splitlines()
    assert [line.split("#")[0].strip() for line in first_block] == ["bash scripts/dev.sh", "bash scripts/test.sh"]
    assert "exec bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / target).is_file(), target
    assert not re.search(r"SPEC|DESIGN\.md|\.\./", readme)


def test_every_test_the_guarantees_page_names_exists():
    page = (ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8")
    named = re.findall(r"`(tests/[\w/]+\.py)::(test_\w+)`", page)
    assert len(named) >= 20
    for path, name in named:
        assert re.search(rf"^\s*def {name}\(", (ROOT / path).read_text(encoding="utf-8"), re.MULTILINE), (path, name)
