"""When a periodic pass is due: `every(...)` intervals and Huey's `crontab(...)`, from the stored last run.

The leader asks `schedule.due(last_run, now)` once a second for every pass;
an answer other than None is the run time it records with the run
(`job_periodic.last_run_at`), so a leader that takes over continues from
what the previous one recorded (SPEC 5.1). Times are naive UTC.

- `every(seconds=…)`: one interval after the last run; a fresh
  installation's first leader runs the pass at once.
- `crontab(minute='0', hour='3')` (Huey's own `huey.crontab`, or any
  function of a datetime answering "run in this minute?"): once in each
  matching minute. A leader that finds one or more matching minutes passed
  since the last run (no leader was up then) runs the pass once, now, not
  once per missed minute. A fresh installation waits for the first
  matching minute: a crontab names times, and "at once" is not one of them.
"""

import datetime

from huey.exceptions import ConfigurationError

MINUTE = datetime.timedelta(minutes=1)
# An interval run late by less than this keeps the cadence (one interval
# after the previous run) instead of starting afresh from now.
CADENCE_TOLERANCE = datetime.timedelta(seconds=2)
# How far back a leader looks for a crontab minute missed while no leader
# was up, and how far ahead for the next one (a crontab's timeout).
CRONTAB_HORIZON = datetime.timedelta(days=366)


def floor_minute(moment):
    return moment.replace(second=0, microsecond=0)


class Every:
    """A fixed interval for `@huey.periodic_task`, down to one second.

    Huey would call it once a minute to ask "run now?"; it always answers no,
    because the elected leader enqueues periodic passes (once per interval
    across all workers), not each consumer's minute ticker.
    """

    def __init__(self, seconds):
        if seconds < 1:
            raise ConfigurationError("a periodic interval must be at least one second")
        self.seconds = seconds
        self.interval = datetime.timedelta(seconds=seconds)

    def __call__(self, timestamp):
        return False

    def __repr__(self):
        return f"every({self.seconds}s)"

    def due(self, last, now):
        if last is not None and now < last + self.interval:
            return None
        # Keep the cadence against tick jitter; when a run is late by more
        # than that (no leader was elected), start afresh from now so two
        # runs never bunch up inside one interval.
        on_time = last is not None and now - (last + self.interval) <= CADENCE_TOLERANCE
        return last + self.interval if on_time else now

    def seconds_to_next(self, now):
        return self.seconds


def every(seconds=0, minutes=0, hours=0):
    return Every(seconds + 60 * minutes + 3600 * hours)


class Crontab:
    """A crontab predicate (a function of a UTC datetime), run once per matching minute."""

    def __init__(self, matches):
        self.matches = matches
        # (after, until): no minute in (after, until] matches. Saves rescanning
        # a long gap every second; a pure fact about the predicate, so it holds
        # for whichever leader asks next with the same last run.
        self._no_match = (None, None)

    def __call__(self, timestamp):
        return False  # Huey's own minute ticker never enqueues it (see Every)

    def __repr__(self):
        return f"crontab({getattr(self.matches, '__qualname__', self.matches)!r})"

    def due(self, last, now):
        minute = floor_minute(now)
        after = floor_minute(last) if last is not None else minute - MINUTE
        if minute <= after:
            return None
        start = after
        known_after, known_until = self._no_match
        if known_after == after and known_until is not None:
            start = max(start, known_until)
        candidate = max(start, minute - CRONTAB_HORIZON) + MINUTE
        while candidate <= minute:
            if self.matches(candidate):
                # Recorded as the current minute: every matching minute up to
                # now is covered by this one run.
                return minute
            candidate += MINUTE
        self._no_match = (after, minute)
        return None

    def seconds_to_next(self, now):
        """Seconds from `now` to the next matching minute (None: none within the horizon)."""
        candidate = floor_minute(now) + MINUTE
        limit = candidate + CRONTAB_HORIZON
        while candidate <= limit:
            if self.matches(candidate):
                return (candidate - now).total_seconds()
            candidate += MINUTE
        return None


def schedule_of(validate_datetime):
    """The schedule for what `@huey.periodic_task(...)` was given."""
    if isinstance(validate_datetime, (Every, Crontab)):
        return validate_datetime
    if callable(validate_datetime):
        return Crontab(validate_datetime)
    raise ConfigurationError("periodic passes take every(seconds=…, minutes=…, hours=…) or huey.crontab(…)")
