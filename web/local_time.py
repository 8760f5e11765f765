"""Times on the panel's pages in the operator's own time zone (SPEC 13.14).

The database and every JSON answer keep UTC; a page shows each time as ISO
8601 with the operator's offset (`2026-12-01T15:04:05+03:00`), so it reads
as local time and still says exactly which moment it is. "Today" and "this
month" on the Home page begin at the operator's local midnight.
"""

import datetime
import zoneinfo

from ops.operators import is_time_zone

UTC = "UTC"


def zone_of(operator):
    """The operator's zone; UTC for a page without one (the login page)."""
    name = getattr(operator, "time_zone", None)
    return zoneinfo.ZoneInfo(name if is_time_zone(name) else UTC)


def local_iso(value, zone):
    """A stored (naive UTC) time in `zone`, with its offset; '' for no time."""
    if value is None:
        return ""
    return value.replace(tzinfo=datetime.timezone.utc).astimezone(zone).isoformat(timespec="seconds")


def local_minute(value, zone):
    """HH:MM of a stored time in `zone` (chart labels)."""
    return value.replace(tzinfo=datetime.timezone.utc).astimezone(zone).strftime("%H:%M")


def day_start(now, zone):
    """The operator's local midnight today, as naive UTC (what the database compares with)."""
    local = now.replace(tzinfo=datetime.timezone.utc).astimezone(zone)
    return _utc(datetime.datetime.combine(local.date(), datetime.time(), tzinfo=zone))


def month_start(now, zone):
    """Local midnight of the first of this month, as naive UTC."""
    local = now.replace(tzinfo=datetime.timezone.utc).astimezone(zone)
    return _utc(datetime.datetime.combine(local.date().replace(day=1), datetime.time(), tzinfo=zone))


def last_days(now, zone, count):
    """The operator's last `count` days up to today: (their dates, each one's local midnight as naive UTC,
    tomorrow's local midnight). A day with a clock change is 23 or 25 hours long, as the operator lived it."""
    today = local_date(now, zone)
    dates = [today - datetime.timedelta(days=count - 1 - index) for index in range(count)]
    midnights = [_utc(datetime.datetime.combine(date, datetime.time(), tzinfo=zone)) for date in dates]
    tomorrow = _utc(datetime.datetime.combine(today + datetime.timedelta(days=1), datetime.time(), tzinfo=zone))
    return dates, midnights, tomorrow


def local_date(now, zone):
    return now.replace(tzinfo=datetime.timezone.utc).astimezone(zone).date()


def _utc(aware):
    return aware.astimezone(datetime.timezone.utc).replace(tzinfo=None)
