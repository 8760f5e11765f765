"""Structured, redacted logs: `level logger message key=value ...` on stderr.

Job logs carry job_id, kind and attempt as fields (SPEC 11); every record
passes through the redactor before it is written (SPEC 12.2).
"""

import logging
import sys

from security.redactor import redact

FIELDS = ("job_id", "kind", "attempt", "queue", "task", "worker_id", "state", "table", "count", "reason", "error")


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


def configure_logging(level="INFO"):
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
