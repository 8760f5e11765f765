"""Structured, redacted logs: `level logger message key=value ...` on stderr (or a file).

Job logs carry job_id, kind and attempt as fields (SPEC 11); every record
passes through the redactor before it is written (SPEC 12.2). An error that
repeats (a loop retrying through an outage) goes through `log_repeated`, so
it costs one line per window instead of one per attempt.
"""

import logging
import sys
import threading
import time

from security.redactor import redact

FIELDS = (
    "job_id", "kind", "attempt", "queue", "task", "worker_id", "state", "table", "count", "reason",
    "enqueued", "skipped_as_duplicate", "dropped", "routed", "published", "failed", "error",
)  # fmt: skip
REPEAT_WINDOW_S = 60
# Distinct repeating errors remembered at once; past this the ones whose
# window has ended are forgotten (they log in full again if they come back).
REPEAT_MEMORY = 256


class RedactingFormatter(logging.Formatter):
    def format(self, record):
        message = record.getMessage()
        fields = []
        for name in FIELDS:
            if hasattr(record, name):
                fields.append(f"{name}={getattr(record, name)}")
        line = f"{self.formatTime(record)} {record.levelname} {record.name} {message}"
        if fields:
            line += " " + " ".join(fields)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return redact_log(line)


def redact_log(line):
    # Tracebacks can be long; redact without the length cap so the frame
    # lines survive, only secrets and bodies go.
    return "\n".join(redact(part) for part in line.split("\n"))


def configure_logging(level="INFO", path=None):
    """Every record through the redacting formatter, to stderr or, given `path`, to that file."""
    handler = logging.FileHandler(path) if path else logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def describe_error(error):
    """`Type: first line of the message`: drivers' messages run over several lines."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


_repeats_lock = threading.Lock()
_repeats = {}  # identity -> [monotonic end of its window, occurrences not logged]


def log_repeated(logger, level, message, error=None, trace=False, **fields):
    """Log an error that may come back many times: in full the first time, then
    at most one line per REPEAT_WINDOW_S saying how often it came back (`count`).

    Identical means the same logger, message, fields and error (type and first
    line). With `trace`, the first line carries the traceback of `error`.
    Returns whether a line was written.
    """
    described = describe_error(error) if error is not None else None
    identity = (logger.name, message, described, tuple(sorted(fields.items())))
    now = time.monotonic()
    with _repeats_lock:
        seen = _repeats.get(identity)
        if seen is not None and now < seen[0]:
            seen[1] += 1
            return False
        repeated = seen[1] + 1 if seen is not None else 0
        if seen is None and len(_repeats) >= REPEAT_MEMORY:
            for key in [key for key, (ends, _) in _repeats.items() if ends <= now]:
                del _repeats[key]
        _repeats[identity] = [now + REPEAT_WINDOW_S, 0]
    extra = dict(fields)
    if described is not None:
        extra["error"] = described
    if repeated:
        extra["count"] = repeated
        times = "time" if repeated == 1 else "times"
        logger.log(level, f"{message} (seen {repeated} more {times} since last logged)", extra=extra)
    else:
        logger.log(level, message, extra=extra, exc_info=error if trace else None)
    return True
