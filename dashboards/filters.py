"""Reading filters from a query string: every value checked, every problem a message, never an exception.

A page given a filter it cannot read answers 400 with the messages and lists nothing: showing everything instead
would mislead, and a bulk action on "everything this filter matches" must never widen to everything."""

from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any

from django.http import QueryDict
from django.utils import timezone

from jobconsole.moments import to_utc

MAX_TEXT = 200


@dataclass(slots=True)
class Filters:
    """The filters a request asked for that made sense, and what was wrong with the rest."""

    values: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # how a filter was applied, when the operator should know

    def text(self, query: QueryDict, name: str, label: str) -> str:
        value = query.get(name, "").strip()
        if len(value) > MAX_TEXT:
            self.errors.append(f"{label} is longer than {MAX_TEXT} characters.")
            return ""
        if value:
            self.values[name] = value
        return value

    def choice(self, query: QueryDict, name: str, label: str, choices: list[str]) -> str:
        value = query.get(name, "").strip()
        if value and value not in choices:
            self.errors.append(f"Unknown {label} {value!r}.")
            return ""
        if value:
            self.values[name] = value
        return value

    def moment(self, query: QueryDict, name: str, label: str, *, end_of_day: bool = False) -> datetime | None:
        """A date (2026-11-25) or a date and time (2026-11-25T14:05), in the operator's time zone."""
        raw = query.get(name, "").strip()
        if not raw:
            return None
        try:
            if len(raw) <= 10:
                day = date.fromisoformat(raw)
                parsed = datetime.combine(day, time.max if end_of_day else time.min)
            else:
                parsed = datetime.fromisoformat(raw)
        except ValueError:
            self.errors.append(f"{label} {raw!r} is not a date like 2026-11-25 or 2026-11-25T14:05.")
            return None
        try:
            parsed = to_utc(timezone.make_aware(parsed) if timezone.is_naive(parsed) else parsed)
        except ValueError:
            self.errors.append(f"{label} {raw!r} is out of the range of times that can be stored.")
            return None
        self.values[name] = raw
        return parsed
