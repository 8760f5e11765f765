"""A 15-second periodic pass for the leader and periodic-scheduling tests."""

from jobs import every, huey
from tests.support.kinds import record_start

TICK_SECONDS = 15


@huey.periodic_task(every(seconds=TICK_SECONDS), name="t_tick")
def t_tick():
    record_start("tick")
