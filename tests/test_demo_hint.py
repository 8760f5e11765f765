"""The demo's closing hint is a command that works as printed, from a shell without the
project's virtualenv on its PATH."""

import subprocess
import sys
from pathlib import Path

from config.settings import PROJECT_ROOT
from devtools import demo

BARE_PATH = "/usr/local/bin:/usr/bin:/bin"  # no virtualenv's bin: `python` here is not the project's


def test_the_hint_names_the_interpreter_running_relative_to_the_checkout(monkeypatch):
    monkeypatch.chdir(PROJECT_ROOT)
    python, rest = demo.command_line("jobs", "list").split(" ", 1)
    assert rest == "omniflow.py jobs list"
    assert Path(PROJECT_ROOT, python).resolve() == Path(sys.executable).resolve()
    assert python.startswith("/") != Path(sys.executable).is_relative_to(PROJECT_ROOT)


def test_the_printed_hint_lists_the_rows_from_a_shell_outside_the_virtualenv(tmp_path, monkeypatch):
    database = tmp_path / "demo.sqlite3"
    for directory in (PROJECT_ROOT, tmp_path):
        monkeypatch.chdir(directory)
        migrate = demo.rows_hint(database).replace(" jobs list", " migrate")
        listing = demo.rows_hint(database)
        for command in (migrate, listing):
            done = subprocess.run(
                command, shell=True, capture_output=True, text=True, timeout=60,
                env={"PATH": BARE_PATH, "HOME": str(tmp_path)},
            )  # fmt: skip
            assert done.returncode == 0, (command, done.stderr)
        assert "totals: no jobs" in done.stdout
