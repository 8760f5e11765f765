"""The code keeps the rules of ruff.toml (pyflakes, pycodestyle, import order, 120 columns): an unused
import or name, a redefinition or an overlong line fails the suite, not only a reviewer's eye."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing_to_fix():
    ruff = Path(sys.executable).parent / "ruff"
    command = [str(ruff)] if ruff.exists() else [shutil.which("ruff") or "ruff"]
    checked = subprocess.run([*command, "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
