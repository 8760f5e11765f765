"""What `huey_consumer`'s options mean for an Omniflow worker: each one works, or the worker refuses to start naming it.

- `-w`: refused (every queue has its fixed threads, SPEC 1.3; run more
  worker processes); `-k`: `thread` only; `-d`, `-m`, `-b`: refused (worker
  threads do not poll, their queue's producer hands them claimed jobs); `-s`:
  `1` only (maintenance looks every second); `-S`: refused (one log format).
- `-n`: this worker never stands for leader (no periodic passes, rescue or
  cleaning from it); `-t`: the graceful shutdown's wait (default 25 s, not
  Huey's "forever"); `-g`: Huey's meaning (that signal graceful, the other
  hands running jobs back at once), without it both are graceful.
- `-c`, `-C`, `-M`, `-f`, `-L`: Huey's meaning; `-v`/`-q`: log level DEBUG /
  WARNING over `LOG_LEVEL`; `-l FILE`: the redacted log lines go to FILE.

huey_consumer passes every option to `create_consumer`, Huey's default for
those not given, so its keywords cannot tell `-w 1` from no `-w`. When it is
the program, the options are read from its command line with Huey's own
parser; otherwise (`python omniflow.py worker`, a direct call) the keywords
that differ from Huey's defaults are the ones given.
"""

import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from huey.consumer_options import OptionParserHandler, config_defaults

SHUTDOWN_TIMEOUT_S = 25  # Heroku sends SIGKILL 30 s after SIGTERM
HUEY_CONSUMER = "huey_consumer"
HUEY_DEFAULTS = dict(config_defaults)
LOG_LEVEL_OF_VERBOSE = {True: "DEBUG", False: "WARNING"}

NO_WIDTH = "every queue has a fixed number of threads (critical 16, default 8, bulk 4); run more worker processes"
NO_POLLING = "workers do not poll Huey's queue: their queue's producer hands them claimed jobs"
REFUSED = {
    "workers": NO_WIDTH,
    "initial_delay": NO_POLLING,
    "max_delay": NO_POLLING,
    "backoff": NO_POLLING,
    "simple_log": "log lines have one format, structured and redacted",
}
PASSED_TO_HUEY = ("check_worker_health", "health_check_interval", "max_tasks", "flush_locks", "extra_locks")


class OptionRefused(ValueError):
    """An option this worker cannot honour; the message names it."""

    def __init__(self, flag, reason):
        super().__init__(f"{flag} is not supported by the Omniflow worker: {reason}")
        self.flag = flag


@dataclass(frozen=True)
class WorkerOptions:
    shutdown_timeout: float = SHUTDOWN_TIMEOUT_S
    stand_for_leader: bool = True
    graceful_signal: str = None  # None: SIGTERM and SIGINT are both graceful
    check_worker_health: bool = True
    health_check_interval: float = 10
    max_tasks: int = None
    flush_locks: bool = False
    extra_locks: str = None
    log_level: str = None  # None: LOG_LEVEL
    log_file: str = None  # None: stderr


def _parser():
    return OptionParserHandler().get_option_parser()


def flag_of(dest, value=None):
    """'-w/--workers' for an option's destination (-v or -q by value for `verbose`)."""
    for option in _parser()._get_all_options():
        if option.dest != dest:
            continue
        if option.action in ("store_true", "store_false") and value is not None:
            if (option.action == "store_true") != bool(value):
                continue
        return "/".join(option._short_opts + option._long_opts)
    return dest


def run_by_huey_consumer(argv=None):
    argv = sys.argv if argv is None else argv
    return bool(argv) and Path(argv[0]).name.startswith(HUEY_CONSUMER)


def given_options(keywords, argv=None):
    """The options the user actually set, {destination: value}."""
    argv = sys.argv if argv is None else argv
    if run_by_huey_consumer(argv):
        parsed, _ = _parser().parse_args(list(argv[1:]))
        return {name: value for name, value in vars(parsed).items() if value is not None}
    missing = object()
    return {name: value for name, value in keywords.items() if HUEY_DEFAULTS.get(name, missing) != value}


def resolve(given):
    """WorkerOptions for the given options; OptionRefused for the first one that cannot work."""
    values = {}
    for name, value in given.items():
        if name in REFUSED:
            raise OptionRefused(flag_of(name), REFUSED[name])
        if name == "worker_type":
            if value != "thread":
                raise OptionRefused(flag_of(name), f"jobs run in threads; {value!r} is not available")
        elif name == "scheduler_interval":
            if value != 1:
                raise OptionRefused(flag_of(name), "queue maintenance and periodic passes are checked every second")
        elif name == "periodic":
            values["stand_for_leader"] = bool(value)
        elif name == "shutdown_timeout":
            if value is not None:
                values["shutdown_timeout"] = float(value)
        elif name == "graceful_signal":
            values["graceful_signal"] = value
        elif name == "verbose":
            values["log_level"] = LOG_LEVEL_OF_VERBOSE[bool(value)]
        elif name == "logfile":
            values["log_file"] = value
        elif name in PASSED_TO_HUEY:
            values[name] = value
        else:
            raise OptionRefused(name, "not an option of huey_consumer")
    if values.get("max_tasks") and not values.get("check_worker_health", True):
        raise OptionRefused(flag_of("max_tasks"), "recycling threads needs the health check (drop -C)")
    return WorkerOptions(**values)


def leave_logging_to_the_worker():
    """huey_consumer gives Huey's logger a handler of its own (its format, nothing
    redacted); the worker's lines go through config.logging instead."""
    huey_logger = logging.getLogger("huey")
    for handler in list(huey_logger.handlers):
        huey_logger.removeHandler(handler)
        handler.close()
    huey_logger.setLevel(logging.NOTSET)
