"""When a job runs, as callers say it: a delay, a date, or Runqueue's relative `[n, unit]` (months|M, weeks|w,
days|d, hours|h, minutes|m, seconds|s, singular or plural). The client, Runqueue's AddJob and the HTTP API read
run_at through `parse_run_at`."""

import calendar
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobconsole.core.errors import InvalidJob

MAX_DELAY_SECONDS = 5 * 365 * 86400  # run_at/delay further out than this is almost surely a mistake
TOO_FAR = f"is too far in the future (at most {MAX_DELAY_SECONDS:,} seconds, 5 years, from now)"

_UNIT_SECONDS = {"weeks": 7 * 86400, "days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}
_UNITS = {
    **{alias: unit for unit in ("months", *_UNIT_SECONDS) for alias in (unit, unit[:-1])},
    "M": "months", "w": "weeks", "d": "days", "h": "hours", "m": "minutes", "s": "seconds",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Timing:
    """When a job runs: after `delay` seconds (counted on Redis's clock) or at `run_at`; neither = now."""

    delay: float | None = None
    run_at: datetime | None = None


def parse_run_at(value: Any, *, now: datetime | None = None) -> Timing:
    """A Runqueue run_at: None (now), a timezone-aware datetime or ISO 8601 text, or a relative [n, unit]."""
    if value is None:
        return Timing()
    if isinstance(value, datetime):
        return Timing(run_at=_aware(value))
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidJob(f"run_at {value!r} is not an ISO 8601 date (e.g. 2026-01-31T09:00:00Z)") from None
        return Timing(run_at=_aware(parsed))
    if isinstance(value, (list, tuple)):
        return Timing(delay=relative_seconds(value, now=now))
    raise InvalidJob(f"run_at must be a date or [n, unit]; got {value!r}")


def relative_seconds(spec: list[Any] | tuple[Any, ...], *, now: datetime | None = None) -> float:
    """The seconds of a relative [n, unit]; months are calendar months from `now` (a day past the month's end
    becomes its last day, as moment.js adds them)."""
    if len(spec) != 2:
        raise InvalidJob(f"a relative run_at is [n, unit]; got {list(spec)!r}")
    n, unit_name = spec
    if isinstance(n, bool) or not isinstance(n, (int, float)) or not math.isfinite(n) or n < 0:
        raise InvalidJob(f"the n of [n, unit] must be a number of 0 or more; got {n!r}")
    unit = _UNITS.get(unit_name) if isinstance(unit_name, str) else None
    if unit is None:
        raise InvalidJob(f"unknown unit {unit_name!r}; use months|M, weeks|w, days|d, hours|h, minutes|m, seconds|s")
    if unit == "months":
        if n != int(n):
            raise InvalidJob(f"months must be a whole number; got {n!r}")
        start = now or datetime.now(UTC)
        seconds = (add_months(start, int(n)) - start).total_seconds()
    else:
        seconds = n * _UNIT_SECONDS[unit]
    if seconds > MAX_DELAY_SECONDS:
        raise InvalidJob(f"run_at {list(spec)!r} {TOO_FAR}")
    return seconds


def add_months(moment: datetime, months: int) -> datetime:
    if months > MAX_DELAY_SECONDS // (28 * 86400):  # a year past datetime's range fails below otherwise
        raise InvalidJob(f"run_at [{months}, months] {TOO_FAR}")
    index = moment.month - 1 + months
    year, month = moment.year + index // 12, index % 12 + 1
    day = min(moment.day, calendar.monthrange(year, month)[1])
    return moment.replace(year=year, month=month, day=day)


def _aware(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise InvalidJob("run_at needs a time zone (e.g. 2026-01-31T09:00:00Z)")
    return moment
