"""Priorities: integers, lower runs first, plus the names high/normal/low."""

from typing import Any

from jobconsole.core.errors import InvalidJob

PRIORITY_NAMES = {"high": -10, "normal": 0, "low": 10}
MIN_PRIORITY, MAX_PRIORITY = -1000, 1000


def parse_priority(value: Any) -> int:
    if isinstance(value, str) and value in PRIORITY_NAMES:
        return PRIORITY_NAMES[value]
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJob(f"priority must be an integer or one of high, normal, low; got {value!r}")
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise InvalidJob(f"priority must be between {MIN_PRIORITY} and {MAX_PRIORITY}; got {value}")
    return value
