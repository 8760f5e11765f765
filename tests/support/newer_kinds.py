"""A job kind standing for one a newer release declares: the test worker declares it only
with --newer-kinds, so a worker without the flag plays a worker of the older release."""

from jobs import huey
from tests.support.kinds import record_start


@huey.job("t_newer", queue="critical", max_attempts=3)
def t_newer(n):
    record_start(f"newer-{n}")
