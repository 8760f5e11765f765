"""A pass on Huey's crontab that matches every minute, for the crontab process test."""

from jobs import crontab, huey
from tests.support.kinds import record_start


@huey.periodic_task(crontab(), name="t_minutely")
def t_minutely():
    record_start("minutely")
