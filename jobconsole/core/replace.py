"""Runqueue's `replace`: a task finishes by asking to run again later with a new state, keeping its id.

    from jobconsole.core import Replace

    @task(name="reports.sync")
    def sync(cursor: int = 0) -> Replace | None:
        cursor = fetch_page(cursor)
        return Replace(params={"cursor": cursor}, delay=60) if cursor else None

The job's attempt closes as `replaced` (its history keeps it), the new params and priority are checked as an
enqueue checks them, its attempt count goes back to 0 and it waits until its new run-at (lua/replace.lua).
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobconsole.core.client import encode_params
from jobconsole.core.errors import InvalidJob
from jobconsole.core.priority import parse_priority
from jobconsole.core.runqueue import state_params, to_priority
from jobconsole.core.tasks import Task
from jobconsole.core.timing import parse_run_at


@dataclass(frozen=True, slots=True)
class Replace:
    """Run this job again: new `params` and `priority` (None keeps them), after `delay` seconds or at `run_at`
    (a datetime, ISO text or Runqueue's [n, unit]; neither: at once)."""

    params: dict[str, Any] | None = None
    priority: int | str | None = None
    delay: float | None = None
    run_at: datetime | str | list[Any] | tuple[Any, ...] | None = None
    result: Any = None  # what this run returned, kept in the closed attempt

    @classmethod
    def from_runqueue(cls, replace: dict[str, Any]) -> "Replace":
        """Runqueue's `{success: true, replace: {run_at, json, priority?}}`, its `replace` part: `json` the new
        state (text or a dict), `run_at` a date or [n, unit], `priority` Runqueue's (lower first, 1000 normal)."""
        unknown = set(replace) - {"run_at", "json", "priority"}
        if unknown:
            raise InvalidJob(f"Runqueue's replace takes run_at, json and priority; not {', '.join(sorted(unknown))}")
        priority = replace.get("priority")
        return cls(
            params=state_params(replace["json"]) if "json" in replace else None,
            priority=None if priority is None else to_priority(priority),
            run_at=replace.get("run_at"),
        )


@dataclass(frozen=True, slots=True)
class ReplaceArgs:
    """A Replace as replace.lua takes it ('' = keep, or none)."""

    params_json: str
    priority: str
    delay_ms: str
    run_at_ms: str


def encode_replace(replace: Replace, task: Task) -> ReplaceArgs:
    """Check a Replace like an enqueue (InvalidJob says what is wrong) and encode it."""
    if replace.delay is not None and replace.run_at is not None:
        raise InvalidJob("Replace: give delay or run_at, not both")
    timing = parse_run_at(replace.run_at)
    delay = replace.delay if replace.delay is not None else timing.delay
    return ReplaceArgs(
        params_json="" if replace.params is None else encode_params(replace.params, task),
        priority="" if replace.priority is None else str(parse_priority(replace.priority)),
        delay_ms="" if delay is None else str(int(max(0.0, float(delay)) * 1000)),
        run_at_ms="" if timing.run_at is None else str(int(timing.run_at.timestamp() * 1000)),
    )
