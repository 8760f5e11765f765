"""Which of a run of days a stored time falls in, as SQL that reads the same on both databases.

Home's charts count per day of the operator's time zone, where a day is not
always 24 hours (daylight saving time) and SQLite knows no time zones: so no
date truncation in SQL at all. The caller gives the days' starts (local
midnights, as the naive UTC the database stores), and a CASE over those
boundaries numbers each row's day; the WHERE keeps the rows inside them, so
an index on the column bounds what is read.
"""

from peewee import Case


def within(column, starts, end):
    """True for a time inside the days: from the first start to `end`."""
    return (column >= starts[0]) & (column < end)


def day_index(column, starts):
    """0 for a time in the first day … len(starts) - 1 in the last (for a time `within` them)."""
    return Case(None, [(column < start, index) for index, start in enumerate(starts[1:])], len(starts) - 1)
