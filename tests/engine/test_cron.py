"""The cron parser: fields, ranges, steps, names, macros, day-of-month OR day-of-week, time zones."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from jobconsole.core.cron import CronError, CronExpression

START = datetime(2026, 1, 1, 0, 0, tzinfo=UTC)  # a Thursday


def upcoming(text: str, count: int = 3, after: datetime = START, zone: str = "UTC") -> list[str]:
    expression = CronExpression.parse(text)
    found: list[str] = []
    moment = after
    for _ in range(count):
        nxt = expression.next_after(moment, ZoneInfo(zone))
        assert nxt is not None
        found.append(nxt.strftime("%Y-%m-%d %H:%M %a"))
        moment = nxt
    return found


def test_every_minute_starts_strictly_after() -> None:
    assert upcoming("* * * * *", 2) == ["2026-01-01 00:01 Thu", "2026-01-01 00:02 Thu"]
    half_past = datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)
    assert upcoming("* * * * *", 1, half_past) == ["2026-01-01 00:01 Thu"]


def test_lists_ranges_and_steps() -> None:
    assert upcoming("*/20 * * * *") == ["2026-01-01 00:20 Thu", "2026-01-01 00:40 Thu", "2026-01-01 01:00 Thu"]
    assert upcoming("5,10-12 3 * * *", 4) == [
        "2026-01-01 03:05 Thu", "2026-01-01 03:10 Thu", "2026-01-01 03:11 Thu", "2026-01-01 03:12 Thu",
    ]  # fmt: skip
    assert upcoming("0 8-20/6 * * *") == ["2026-01-01 08:00 Thu", "2026-01-01 14:00 Thu", "2026-01-01 20:00 Thu"]
    assert upcoming("30/15 0 * * *", 2) == ["2026-01-01 00:30 Thu", "2026-01-01 00:45 Thu"]


def test_names_for_months_and_weekdays() -> None:
    assert upcoming("0 9 * * MON-FRI", 3) == ["2026-01-01 09:00 Thu", "2026-01-02 09:00 Fri", "2026-01-05 09:00 Mon"]
    assert upcoming("0 0 1 mar,Sep *", 2) == ["2026-03-01 00:00 Sun", "2026-09-01 00:00 Tue"]
    assert upcoming("0 0 * * 7", 1) == upcoming("0 0 * * SUN", 1) == ["2026-01-04 00:00 Sun"]


def test_day_of_month_or_day_of_week_when_both_are_restricted() -> None:
    # Cron's rule: the 13th of the month OR any Friday.
    assert upcoming("0 0 13 * FRI", 3) == ["2026-01-02 00:00 Fri", "2026-01-09 00:00 Fri", "2026-01-13 00:00 Tue"]
    # One restricted, the other '*': the restricted one alone decides.
    assert upcoming("0 0 13 * *", 2) == ["2026-01-13 00:00 Tue", "2026-02-13 00:00 Fri"]
    # "*/10" starts with '*', so both must hold: a Friday that is the 1st, 11th, 21st or 31st.
    assert upcoming("0 0 */10 * FRI", 1) == ["2026-05-01 00:00 Fri"]


def test_macros() -> None:
    assert upcoming("@hourly", 1) == ["2026-01-01 01:00 Thu"]
    assert upcoming("@daily", 1) == upcoming("@midnight", 1) == ["2026-01-02 00:00 Fri"]
    assert upcoming("@weekly", 1) == ["2026-01-04 00:00 Sun"]
    assert upcoming("@monthly", 1) == ["2026-02-01 00:00 Sun"]
    assert upcoming("@yearly", 1) == upcoming("@annually", 1) == ["2027-01-01 00:00 Fri"]


def test_leap_day_and_impossible_dates() -> None:
    assert upcoming("0 0 29 2 *", 1) == ["2028-02-29 00:00 Tue"]
    assert CronExpression.parse("0 0 30 2 *").next_after(START) is None


def test_utc_has_no_dst_gaps_or_repeats() -> None:
    # 02:30 every day through the US and EU change dates: in UTC every day has it once.
    days = upcoming("30 2 * * *", 40, datetime(2026, 3, 1, tzinfo=UTC))
    assert len(set(days)) == 40
    assert days[7] == "2026-03-08 02:30 Sun" and days[28] == "2026-03-29 02:30 Sun"


def test_a_zones_skipped_wall_time_does_not_fire_and_a_repeated_one_fires_once() -> None:
    new_york = ZoneInfo("America/New_York")
    nightly = CronExpression.parse("30 1,2 * * *")
    spring = nightly.next_after(datetime(2026, 3, 8, 6, 0, tzinfo=UTC), new_york)  # 01:00 EST
    assert spring == datetime(2026, 3, 8, 6, 30, tzinfo=UTC)  # 01:30 EST
    assert nightly.next_after(spring, new_york) == datetime(2026, 3, 9, 5, 30, tzinfo=UTC)  # 02:30 skipped
    fall = nightly.next_after(datetime(2026, 11, 1, 5, 0, tzinfo=UTC), new_york)  # 01:00 EDT
    assert fall == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # 01:30 EDT, the first of the two
    assert nightly.next_after(fall, new_york) == datetime(2026, 11, 1, 7, 30, tzinfo=UTC)  # 02:30 EST


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("* * * *", "5 fields"),
        ("60 * * * *", "minute: 60 is outside 0-59"),
        ("* 24 * * *", "hour"),
        ("* * 0 * *", "day of month"),
        ("* * * 13 *", "month"),
        ("* * * * 8", "day of week"),
        ("* * * FOO *", "not a number or a name"),
        ("*/0 * * * *", "step"),
        ("5-1 * * * *", "backwards"),
        ("1,,2 * * * *", "empty"),
        ("@every", "unknown macro"),
    ],
)
def test_bad_expressions_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(CronError, match=says):
        CronExpression.parse(text)
