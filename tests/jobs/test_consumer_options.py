"""SPEC 1.10: every `huey_consumer` option either works in an Omniflow worker or is
refused by name; none is silently overridden (jobs/engine/consumer_options.py)."""

import pytest
from huey.consumer_options import ConsumerConfig

from jobs.engine.consumer_options import (
    SHUTDOWN_TIMEOUT_S,
    OptionRefused,
    WorkerOptions,
    given_options,
    resolve,
)

HUEY_CONSUMER_ARGV0 = "/srv/app/.venv/bin/huey_consumer"


def options_of(*argv):
    """What huey_consumer would make of this command line: the keywords it passes
    to create_consumer (every option, Huey's default where none was given), read
    back as create_consumer reads them."""
    full_argv = [HUEY_CONSUMER_ARGV0, "omniflow.huey", *argv]
    given = given_options(keywords_passed_by_huey_consumer(), argv=full_argv)
    return resolve(given)


def keywords_passed_by_huey_consumer():
    return ConsumerConfig().values


def test_no_option_gives_the_workers_own_defaults():
    options = options_of()
    assert options == WorkerOptions()
    assert options.shutdown_timeout == SHUTDOWN_TIMEOUT_S and options.graceful_signal is None
    assert options.stand_for_leader


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["-w", "4"], "-w/--workers"),
        (["--workers", "1"], "-w/--workers"),  # Huey's default value, but given: still refused
        (["-k", "process"], "-k/--worker-type"),
        (["-k", "greenlet"], "-k/--worker-type"),
        (["-d", "0.5"], "-d/--delay"),
        (["-m", "5"], "-m/--max-delay"),
        (["-b", "2"], "-b/--backoff"),
        (["-s", "10"], "-s/--scheduler-interval"),
        (["-S"], "-S/--simple"),
        (["-M", "100", "-C"], "-M/--max-tasks"),
    ],
)
def test_an_option_that_cannot_work_is_refused_naming_it(argv, flag):
    with pytest.raises(OptionRefused) as refused:
        options_of(*argv)
    assert refused.value.flag == flag
    assert str(refused.value).startswith(f"{flag} is not supported")


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["-k", "thread"], {}),
        (["-s", "1"], {}),
        (["-n"], {"stand_for_leader": False}),
        (["-t", "7.5"], {"shutdown_timeout": 7.5}),
        (["-g", "TERM"], {"graceful_signal": "TERM"}),
        (["-v"], {"log_level": "DEBUG"}),
        (["-q"], {"log_level": "WARNING"}),
        (["-l", "/var/log/worker.log"], {"log_file": "/var/log/worker.log"}),
        (["-c", "3"], {"health_check_interval": 3.0}),
        (["-C"], {"check_worker_health": False}),
        (["-M", "500"], {"max_tasks": 500}),
        (["-f", "-L", "a,b"], {"flush_locks": True, "extra_locks": "a,b"}),
    ],
)
def test_an_option_that_works_reaches_the_worker(argv, expected):
    assert options_of(*argv) == WorkerOptions(**expected)


def test_a_direct_call_counts_only_keywords_that_differ_from_hueys_defaults():
    # `python omniflow.py worker` and direct callers pass keywords; Huey's
    # defaults among them (what a wrapper of huey_consumer would pass) ask for nothing.
    keywords = dict(keywords_passed_by_huey_consumer(), shutdown_timeout=12)
    assert resolve(given_options(keywords, argv=["omniflow.py", "worker"])) == WorkerOptions(shutdown_timeout=12)
    with pytest.raises(OptionRefused) as refused:
        resolve(given_options({"workers": 4}, argv=["omniflow.py", "worker"]))
    assert refused.value.flag == "-w/--workers"
