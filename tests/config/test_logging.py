"""SPEC 11, 12.2: an error that repeats (a loop retrying through an outage)
logs one line, then at most one line per window with how often it came back."""

import logging

from peewee import OperationalError

import config.logging as app_logging
from config.logging import REPEAT_WINDOW_S, log_repeated


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


def test_an_error_repeated_a_thousand_times_logs_one_line_then_one_line_with_its_count_per_window(caplog, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(app_logging, "time", clock)
    log = logging.getLogger("omniflow.test.repeats")
    lost = OperationalError("connection already closed")
    with caplog.at_level(logging.ERROR, logger=log.name):
        for _ in range(1000):
            log_repeated(log, logging.ERROR, "claiming jobs failed", error=lost, queue="critical")
        assert len(caplog.records) == 1
        assert caplog.records[0].error == "OperationalError: connection already closed"

        clock.now += REPEAT_WINDOW_S
        log_repeated(log, logging.ERROR, "claiming jobs failed", error=lost, queue="critical")
        assert len(caplog.records) == 2
        assert caplog.records[1].count == 1000
        assert "1000 more times" in caplog.records[1].getMessage()

        # Another error, or the same one elsewhere, is not a repeat.
        log_repeated(log, logging.ERROR, "claiming jobs failed", error=OperationalError("refused"), queue="critical")
        log_repeated(log, logging.ERROR, "claiming jobs failed", error=lost, queue="bulk")
        assert len(caplog.records) == 4
