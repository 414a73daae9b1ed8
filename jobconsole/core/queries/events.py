"""Events: each queue's stream of state changes, as the mirror and the console read it."""

import json
from collections.abc import Mapping
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


def events_of(queue: str, entry_id: str, fields: Mapping[str, str]) -> list[Event]:
    """The events one stream entry records: one, or one per job of a batch entry (`jobs`, a JSON list of ids,
    with its per-job fields as JSON lists named in the plural: emit_jobs in lua/_lib.lua). Every event of a
    batch has the entry's id."""
    if "jobs" not in fields:
        return [Event(queue, entry_id, dict(fields))]
    jobs = json.loads(fields["jobs"])
    shared = {k: v for k, v in fields.items() if k not in ("jobs", "attempts")}
    attempts = json.loads(fields["attempts"]) if "attempts" in fields else None
    return [
        Event(queue, entry_id, {"job": job_id, **shared, **({"attempt": str(attempts[i])} if attempts else {})})
        for i, job_id in enumerate(jobs)
    ]


def stream_time(entry_id: str) -> datetime:
    """The Redis time an event was written (the milliseconds part of its stream id)."""
    return datetime.fromtimestamp(int(entry_id.split("-", 1)[0]) / 1000, tz=UTC)


class Events(Reader):
    def read(
        self, queue: str, *, after: str | None = None, limit: int = 100, newest_first: bool = False
    ) -> list[Event]:
        """Events of the queue's stream: oldest first after the entry id `after`, or the newest ones. `limit` counts
        stream entries: a batch entry gives one event per job."""
        stream = queue_keys(queue).events
        if newest_first:
            high = f"({after}" if after else "+"
            entries = self.redis.xrevrange(stream, high, "-", count=limit)
        else:
            entries = self.redis.xrange(stream, f"({after}" if after else "-", "+", count=limit)
        read = cast(list[tuple[str, dict[str, str]]], entries)
        return [event for entry_id, fields in read for event in events_of(queue, entry_id, fields)]
