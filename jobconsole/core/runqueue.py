"""Runqueue's AddJob on this engine (the Runqueue seed, docs/seeds.md).

A Runqueue job names a *topic* (here: a registered task), carries its state as a `json` string (here: the
task's keyword arguments, so it must hold a JSON object), a `priority` (lower runs first, 1000 by default),
a `run_at` (a date, or a relative `[n, unit]` as in the seed's config: months|M, weeks|w, days|d, hours|h,
minutes|m, seconds|s, singular or plural) and an optional `unique_key` (a second job with a live job's key is a
DuplicateJob, as the seed's unique index refused it)."""

import json as jsonlib
from datetime import datetime
from typing import Any

from jobconsole.core.client import Client
from jobconsole.core.errors import DuplicateJob, InvalidJob
from jobconsole.core.priority import MAX_PRIORITY, MIN_PRIORITY
from jobconsole.core.results import EnqueueResult
from jobconsole.core.timing import Timing, parse_run_at, relative_seconds

DEFAULT_PRIORITY = 1000  # Runqueue's topic default; it is our 0 ("normal")
PRIORITY_OFFSET = DEFAULT_PRIORITY  # ours = Runqueue's - 1000, so 0..2000 maps onto -1000..1000, order kept


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


__all__ = ["DEFAULT_PRIORITY", "Timing", "add_job", "parse_run_at", "relative_seconds", "state_params", "to_priority"]
