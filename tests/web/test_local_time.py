"""SPEC 13.14: pages show times in the operator's time zone, as ISO 8601 with the
offset; today and this month begin at the operator's local midnight, daylight
saving time included."""

import datetime
import zoneinfo
from types import SimpleNamespace

from web import local_time

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")


def test_a_stored_utc_time_is_shown_with_the_operators_offset():
    moment = datetime.datetime(2026, 7, 1, 22, 30, 5, 123456)
    assert local_time.local_iso(moment, BERLIN) == "2026-07-02T00:30:05+02:00"  # summer time
    assert local_time.local_iso(moment.replace(month=1), BERLIN) == "2026-01-01T23:30:05+01:00"
    assert local_time.local_iso(moment, zoneinfo.ZoneInfo("UTC")) == "2026-07-01T22:30:05+00:00"
    assert local_time.local_iso(None, BERLIN) == ""


def test_today_and_this_month_begin_at_local_midnight_across_a_daylight_saving_change():
    # 29 March 2026: Berlin moves from +01:00 to +02:00 at 02:00 local time.
    after_the_change = datetime.datetime(2026, 3, 29, 12, 0)
    assert local_time.day_start(after_the_change, BERLIN) == datetime.datetime(2026, 3, 28, 23, 0)
    assert local_time.month_start(after_the_change, BERLIN) == datetime.datetime(2026, 2, 28, 23, 0)
    late_evening = datetime.datetime(2026, 7, 31, 22, 30)  # 00:30 on 1 August in Berlin
    assert local_time.local_date(late_evening, BERLIN) == datetime.date(2026, 8, 1)
    assert local_time.month_start(late_evening, BERLIN) == datetime.datetime(2026, 7, 31, 22, 0)


def test_an_operator_without_a_known_zone_sees_utc():
    assert local_time.zone_of(None).key == "UTC"
    assert local_time.zone_of(SimpleNamespace(time_zone="Mars/Olympus")).key == "UTC"
    assert local_time.zone_of(SimpleNamespace(time_zone="Asia/Tokyo")).key == "Asia/Tokyo"
