"""Five-field cron expressions (minute hour day-of-month month day-of-week), our own small parser.

Supported: `*`, numbers, ranges `a-b`, steps `*/n`, `a-b/n` and `a/n` (from a to the field's end), lists
`a,b-c`, month names JAN-DEC, weekday names SUN-SAT (0 and 7 are both Sunday), and the macros @yearly
(@annually), @monthly, @weekly, @daily (@midnight), @hourly.

Day-of-month and day-of-week follow cron's rule: when both are restricted (neither starts with `*`), a day
matches if either does; otherwise the restricted one alone decides.

Times are wall-clock times in the expression's time zone. A wall time a DST change skips never fires; one it
repeats fires once, at its first occurrence.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTHS = {
    name: n
    for n, name in enumerate(
        ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], start=1
    )
}
WEEKDAYS = {name: n for n, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
# A search that finds nothing in this many years never will (e.g. "0 0 30 2 *": February 30th).
SEARCH_YEARS = 5


class CronError(ValueError):
    """An expression that is not valid cron; the message says which field and why."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int]


_FIELDS = (
    _Field("minute", 0, 59, {}),
    _Field("hour", 0, 23, {}),
    _Field("day of month", 1, 31, {}),
    _Field("month", 1, 12, MONTHS),
    _Field("day of week", 0, 7, WEEKDAYS),
)


def _value(text: str, spec: _Field) -> int:
    number = spec.names.get(text.upper()) if not text.isdigit() else int(text)
    if number is None:
        raise CronError(f"{spec.name}: {text!r} is not a number or a name")
    if not spec.low <= number <= spec.high:
        raise CronError(f"{spec.name}: {number} is outside {spec.low}-{spec.high}")
    return number


def _parse_field(text: str, spec: _Field) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise CronError(f"{spec.name}: empty list item in {text!r}")
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"{spec.name}: step {step_text!r} must be a positive number")
            step = int(step_text)
        if base == "*":
            low, high = spec.low, spec.high
        elif "-" in base:
            first, _, last = base.partition("-")
            low, high = _value(first, spec), _value(last, spec)
            if low > high:
                raise CronError(f"{spec.name}: range {base!r} runs backwards")
        else:
            low = _value(base, spec)
            high = spec.high if slash else low  # "a/n" means from a to the end, every n
        values.update(range(low, high + 1, step))
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class CronExpression:
    """A parsed expression; `next_after` gives the next firing time."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_restricted: bool
    weekdays_restricted: bool

    @classmethod
    def parse(cls, text: str) -> "CronExpression":
        expanded = MACROS.get(text.strip().lower(), text) if text.strip().startswith("@") else text
        if expanded.strip().startswith("@"):
            raise CronError(f"unknown macro {text.strip()!r}; known: {', '.join(MACROS)}")
        parts = expanded.split()
        if len(parts) != 5:
            raise CronError(f"a cron expression has 5 fields (minute hour day month weekday); got {len(parts)}")
        minutes, hours, days, months, weekdays = (_parse_field(p, f) for p, f in zip(parts, _FIELDS, strict=True))
        return cls(
            text=text.strip(),
            minutes=minutes,
            hours=hours,
            days=days,
            months=months,
            weekdays=frozenset(d % 7 for d in weekdays),  # 7 is Sunday too
            days_restricted=not parts[2].startswith("*"),
            weekdays_restricted=not parts[4].startswith("*"),
        )

    def _day_matches(self, day: datetime) -> bool:
        in_month = day.day in self.days
        in_week = (day.weekday() + 1) % 7 in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_month or in_week
        return in_month and in_week

    def next_after(self, after: datetime, zone: tzinfo = UTC) -> datetime | None:
        """The first matching minute strictly after `after` (aware), as an aware UTC datetime; None when there
        is none within SEARCH_YEARS."""
        local = after.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0) + timedelta(minutes=1)
        limit = local + timedelta(days=366 * SEARCH_YEARS)
        while local < limit:
            # Jump a whole month, day or hour at a time when it cannot match: a search costs at most a few
            # hundred steps whatever the expression.
            if local.month not in self.months:
                local = (local.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
                continue
            if not self._day_matches(local):
                local = local.replace(hour=0, minute=0) + timedelta(days=1)
                continue
            if local.hour not in self.hours:
                local = local.replace(minute=0) + timedelta(hours=1)
                continue
            if local.minute not in self.minutes:
                local += timedelta(minutes=1)
                continue
            candidate = local.replace(tzinfo=zone, fold=0).astimezone(UTC)
            skipped_by_dst = candidate.astimezone(zone).replace(tzinfo=None) != local
            if not skipped_by_dst and candidate > after:
                return candidate
            local += timedelta(minutes=1)
        return None


def zone_named(name: str) -> tzinfo:
    """A time zone by IANA name; "UTC" (the default everywhere) without the tz database. ValueError when
    there is no such zone."""
    if name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):  # a missing zone is a KeyError; a malformed name a ValueError
        raise ValueError(f"unknown time zone {name!r}") from None
