"""Events: each queue's stream of state changes, as the mirror and the console read it."""

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from jobconsole.core.keys import queue_keys
from jobconsole.core.queries.base import Reader


@dataclass(frozen=True, slots=True)
class Event:
    """One state change as the queue's events stream recorded it."""

    queue: str
    id: str  # stream entry id; its milliseconds are the Redis time of the change
    fields: dict[str, str]

    @property
    def job(self) -> str:
        return self.fields.get("job", "")

    @property
    def name(self) -> str:
        return self.fields.get("event", "")

    @property
    def at(self) -> datetime:
        return stream_time(self.id)


def stream_time(entry_id: str) -> datetime:
    """The Redis time an event was written (the milliseconds part of its stream id)."""
    return datetime.fromtimestamp(int(entry_id.split("-", 1)[0]) / 1000, tz=UTC)


class Events(Reader):
    def read(
        self, queue: str, *, after: str | None = None, limit: int = 100, newest_first: bool = False
    ) -> list[Event]:
        """Events of the queue's stream: oldest first after the entry id `after`, or the newest ones."""
        stream = queue_keys(queue).events
        if newest_first:
            high = f"({after}" if after else "+"
            entries = self.redis.xrevrange(stream, high, "-", count=limit)
        else:
            entries = self.redis.xrange(stream, f"({after}" if after else "-", "+", count=limit)
        return [Event(queue, entry_id, fields) for entry_id, fields in cast(list[tuple[str, dict[str, str]]], entries)]
