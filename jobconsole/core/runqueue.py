"""Runqueue's AddJob on this engine (the Runqueue seed, docs/seeds.md).

A Runqueue job names a *topic* (here: a registered task), carries its state as a `json` string (here: the
task's keyword arguments, so it must hold a JSON object), a `priority` (lower runs first, 1000 by default),
a `run_at` (a date, or a relative `[n, unit]` as in the seed's config: months|M, weeks|w, days|d, hours|h,
minutes|m, seconds|s, singular or plural) and an optional `unique_key` (a second job with a live job's key is a
DuplicateJob, as the seed's unique index refused it)."""

import calendar
import json as jsonlib
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobconsole.core.client import MAX_DELAY_SECONDS, Client
from jobconsole.core.errors import DuplicateJob, InvalidJob
from jobconsole.core.priority import MAX_PRIORITY, MIN_PRIORITY
from jobconsole.core.results import EnqueueResult

DEFAULT_PRIORITY = 1000  # Runqueue's topic default; it is our 0 ("normal")
PRIORITY_OFFSET = DEFAULT_PRIORITY  # ours = Runqueue's - 1000, so 0..2000 maps onto -1000..1000, order kept

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


def add_job(
    client: Client,
    topic: str,
    json: str | dict[str, Any] | None = None,
    *,
    priority: int | None = None,
    run_at: Any = None,
    unique_key: str | None = None,
    now: datetime | None = None,
) -> EnqueueResult:
    """Enqueue a job the way Runqueue's AddJob did. Raises UnknownTask for a topic no task is registered for,
    InvalidJob for a bad value (nothing enqueued), DuplicateJob when `unique_key` is held by a live job."""
    params = state_params(json)
    timing = parse_run_at(run_at, now=now)
    result = client.enqueue(
        topic, params, priority=None if priority is None else to_priority(priority), delay=timing.delay,
        run_at=timing.run_at, unique_key=unique_key,
    )  # fmt: skip
    if result.status == "duplicate":
        raise DuplicateJob(result.id, unique_key or "")
    return result


def state_params(state: str | dict[str, Any] | None) -> dict[str, Any]:
    """The job's `json` state as the task's keyword arguments: a JSON object, given as text or as a dict."""
    if state is None:
        return {}
    if isinstance(state, dict):
        return state
    if not isinstance(state, str):
        raise InvalidJob(f"json must be a string holding a JSON object; got {type(state).__name__}")
    try:
        value = jsonlib.loads(state, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise InvalidJob(f"json is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidJob("json must hold a JSON object (the task's keyword arguments)")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def to_priority(value: Any) -> int:
    """A Runqueue priority (lower first, 1000 the default, 0 to 2000 here) as ours (-1000 to 1000)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJob(f"priority must be an integer (lower runs first, 1000 the default); got {value!r}")
    ours = value - PRIORITY_OFFSET
    if not MIN_PRIORITY <= ours <= MAX_PRIORITY:
        low, high = MIN_PRIORITY + PRIORITY_OFFSET, MAX_PRIORITY + PRIORITY_OFFSET
        raise InvalidJob(f"priority must be from {low} to {high}; got {value}")
    return ours


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
        raise InvalidJob(f"run_at {list(spec)!r} is too far in the future")
    return seconds


def add_months(moment: datetime, months: int) -> datetime:
    if months > MAX_DELAY_SECONDS // (28 * 86400):  # a year past datetime's range fails below otherwise
        raise InvalidJob(f"run_at [{months}, months] is too far in the future")
    index = moment.month - 1 + months
    year, month = moment.year + index // 12, index % 12 + 1
    day = min(moment.day, calendar.monthrange(year, month)[1])
    return moment.replace(year=year, month=month, day=day)


def _aware(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise InvalidJob("run_at needs a time zone (e.g. 2026-01-31T09:00:00Z)")
    return moment


__all__ = ["DEFAULT_PRIORITY", "Timing", "add_job", "parse_run_at", "relative_seconds", "state_params", "to_priority"]
