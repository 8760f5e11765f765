"""SPEC 5.1 for `crontab(...)` passes: once per matching minute (UTC), continued from
the stored last run, one catch-up run for minutes missed while no leader was up;
`every(...)` keeps its cadence (jobs/engine/schedules.py)."""

import datetime

import pytest
from huey import crontab
from huey.exceptions import ConfigurationError

from jobs.engine.schedules import Crontab, Every, every, schedule_of

T = datetime.datetime
MINUTE = datetime.timedelta(minutes=1)


def at_three():
    return schedule_of(crontab(minute="0", hour="3"))


def test_a_crontab_pass_runs_once_in_its_matching_minute_and_records_that_minute():
    schedule = at_three()
    last = T(2026, 12, 1, 3, 0)
    assert schedule.due(last, T(2026, 12, 2, 2, 59, 59)) is None
    assert schedule.due(last, T(2026, 12, 2, 3, 0, 1)) == T(2026, 12, 2, 3, 0)
    ran = T(2026, 12, 2, 3, 0)
    assert schedule.due(ran, T(2026, 12, 2, 3, 0, 40)) is None  # same minute: not again
    assert schedule.due(ran, T(2026, 12, 2, 3, 1)) is None


def test_minutes_missed_while_no_leader_was_up_run_once_not_once_each():
    schedule = schedule_of(crontab(minute="*/5"))
    last = T(2026, 12, 1, 10, 0)
    # No leader from 10:00 to 10:23: 10:05 … 10:20 matched and nobody ran them.
    run_at = schedule.due(last, T(2026, 12, 1, 10, 23, 30))
    assert run_at == T(2026, 12, 1, 10, 23)
    assert schedule.due(run_at, T(2026, 12, 1, 10, 24, 10)) is None
    assert schedule.due(run_at, T(2026, 12, 1, 10, 25, 0)) == T(2026, 12, 1, 10, 25)


def test_a_leader_that_takes_over_continues_from_the_stored_run_instead_of_running_early():
    # The previous leader ran 03:00 and died; the next one starts at 03:00:20.
    assert at_three().due(T(2026, 12, 2, 3, 0), T(2026, 12, 2, 3, 0, 20)) is None


def test_a_fresh_installation_waits_for_the_first_matching_minute():
    schedule = at_three()
    assert schedule.due(None, T(2026, 12, 1, 14, 7)) is None
    assert schedule.due(None, T(2026, 12, 2, 3, 0, 2)) == T(2026, 12, 2, 3, 0)


def test_every_minute_of_a_day_asked_each_second_gives_one_run_per_minute():
    schedule = schedule_of(crontab())
    last, runs = None, []
    moment = T(2026, 12, 1, 0, 0, 0)
    while moment < T(2026, 12, 1, 0, 10):
        run_at = schedule.due(last, moment)
        if run_at is not None:
            runs.append(run_at)
            last = run_at
        moment += datetime.timedelta(seconds=1)
    assert runs == [T(2026, 12, 1, 0, m) for m in range(10)]


def test_a_crontab_runs_timeout_is_until_its_next_matching_minute():
    assert at_three().seconds_to_next(T(2026, 12, 1, 3, 0, 10)) == 24 * 3600 - 10
    assert schedule_of(crontab(minute="*/15")).seconds_to_next(T(2026, 12, 1, 3, 0, 30)) == 14 * 60 + 30
    assert schedule_of(crontab(month="2", day="30")).seconds_to_next(T(2026, 12, 1)) is None  # never matches


def test_huey_never_enqueues_a_pass_on_its_own_minute_ticker():
    assert at_three()(T(2026, 12, 2, 3, 0)) is False
    assert every(seconds=15)(T(2026, 12, 2, 3, 0)) is False


def test_every_keeps_its_cadence_and_starts_afresh_after_a_long_gap():
    schedule = every(seconds=15)
    last = T(2026, 12, 1, 10, 0, 0)
    assert schedule.due(last, T(2026, 12, 1, 10, 0, 14)) is None
    assert schedule.due(last, T(2026, 12, 1, 10, 0, 16)) == T(2026, 12, 1, 10, 0, 15)
    assert schedule.due(last, T(2026, 12, 1, 10, 5, 0)) == T(2026, 12, 1, 10, 5, 0)
    assert schedule.due(None, T(2026, 12, 1, 10, 5, 0)) == T(2026, 12, 1, 10, 5, 0)  # fresh: at once


def test_a_periodic_pass_takes_every_or_a_crontab_and_nothing_else():
    assert isinstance(schedule_of(every(minutes=5)), Every)
    assert isinstance(schedule_of(crontab(hour="3")), Crontab)
    with pytest.raises(ConfigurationError):
        schedule_of("*/5 * * * *")
