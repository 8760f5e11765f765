"""A fake's state kept in a JSON file between runs, so a restarted dev stack finds the world its database remembers.

Without it a restart leaves the fake panel without the users the back office
shows as active and the fake providers without the payments the orders point
at. A fake given a file (`--state-file`, which the dev stack points into
var/) loads it at start and writes it again, whole, after every request that
may have changed something and at every change it makes by itself (an
auto-paid payment); `--fresh` deletes it first, so the fake starts empty.
Tests give no file and start empty, as before. Only what the fake serves is
kept (users, payments, invoices and what their replays need), never counters,
faults or delivery logs: those describe one run.

A write goes to a temporary file that replaces the old one, so a fake killed
mid-write leaves the previous state, never half of one.
"""

import base64
import datetime
import json
import os
from decimal import Decimal

# How values JSON has no type for are tagged in the file.
_TAGS = {
    "$datetime": datetime.datetime.fromisoformat,
    "$decimal": Decimal,
    "$bytes": base64.b64decode,
}


def _encode(value):
    if isinstance(value, datetime.datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    raise TypeError(f"a fake's state cannot hold {type(value).__name__}")


def _decode(obj):
    if len(obj) == 1:
        ((tag, raw),) = obj.items()
        if tag in _TAGS:
            return _TAGS[tag](raw)
    return obj


class StateFileError(Exception):
    """The file exists and cannot be read back: the fake refuses to start rather than start empty unasked."""


class KeepsState:
    """For a fake with a `_lock`: `_snapshot()` returns its state as plain data, `_restore(state)` takes it back."""

    _state_path = None

    def keep_state_in(self, path, fresh=False):
        """Load the state from `path` (unless `fresh`: then it is deleted) and write every change to it."""
        if fresh and os.path.exists(path):
            os.remove(path)
        if os.path.exists(path):
            try:
                with open(path, encoding="utf-8") as handle:
                    state = json.load(handle, object_hook=_decode)
                with self._lock:
                    self._restore(state)
            except (OSError, ValueError, KeyError, TypeError) as error:
                raise StateFileError(
                    f"{path} cannot be read back ({type(error).__name__}); start with --fresh to begin empty"
                ) from None
        self._state_path = path
        self.save_state()

    def state_line(self):
        """What the fake prints at start about where its state lives."""
        if self._state_path is None:
            return "state: in memory, gone when it stops (--state-file keeps it)"
        return f"state: kept in {self._state_path} (--fresh starts empty)"

    def save_state(self):
        if self._state_path is None:
            return
        with self._lock:
            text = json.dumps(self._snapshot(), default=_encode)
            os.makedirs(os.path.dirname(os.path.abspath(self._state_path)), exist_ok=True)
            temporary = f"{self._state_path}.tmp"
            with open(temporary, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(temporary, self._state_path)
