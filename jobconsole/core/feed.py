"""The event feed: how the database mirror reads every queue's events stream, exactly once per consumer group.

Every state change appends an event to its queue's stream in the same script. The mirror reads the streams
through one consumer group (`keys.MIRROR_GROUP`) with a fixed consumer name, so a new leader inherits the
entries a dead one read and never acknowledged. Each read also counts Redis's epoch up (mirror_read.lua):
the mirror records it, and a value not above the recorded one means Redis lost writes.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis

from jobconsole.core import cluster, keys
from jobconsole.core.keys import queue_keys
from jobconsole.core.queries.events import Event, events_of
from jobconsole.core.store import Store

CONSUMER = "mirror"  # fixed, so a new leader inherits the pending entries of a dead one


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """A stream as the read saw it, for the gap check."""

    last_id: str  # last-generated-id: the newest entry ever added
    entries_added: int  # every entry ever added (more than `length` once some were trimmed)
    length: int
    first_id: str | None  # the oldest entry still there; None when the stream is empty


@dataclass(frozen=True, slots=True)
class FeedRead:
    epoch: int  # Redis's epoch after this read
    streams: dict[str, StreamInfo | None]  # per queue; None when the stream is gone
    group_missing: bool  # the group (or a stream) vanished: nothing was read
    events: list[Event]
    trimmed: dict[str, list[str]]  # per queue: pending entries trimmed before they were applied
    full: bool = False  # some stream gave as many entries as asked for: more may follow (an entry holds up to 50 jobs)


def _pairs(flat: Sequence[Any]) -> dict[str, Any]:
    it = iter(flat)
    return dict(zip(it, it, strict=True))


def _info(raw: Any) -> StreamInfo | None:
    if raw == 0:
        return None
    d = _pairs(raw)
    first = d.get("first-entry")
    return StreamInfo(
        last_id=str(d["last-generated-id"]), entries_added=int(d.get("entries-added", 0)),
        length=int(d.get("length", 0)), first_id=str(first[0]) if first and first[0] else None,
    )  # fmt: skip


class EventFeed:
    def __init__(self, store: Store, *, group: str = keys.MIRROR_GROUP) -> None:
        self.store = store
        self.redis = store.redis
        self.group = group

    def read(self, queues: Sequence[str], *, count: int, pending: bool) -> FeedRead:
        """One atomic read of every queue's stream: the entries read before and not acknowledged (pending), or
        the next new ones; with each stream's description as of the read."""
        epoch, raw_infos, raw_read = self.store.mirror_read(
            queues, group=self.group, consumer=CONSUMER, count=count, pending=pending
        )
        streams = {q: _info(raw) for q, raw in zip(queues, raw_infos, strict=True)}
        by_stream = {queue_keys(q).events: q for q in queues}
        events: list[Event] = []
        trimmed: dict[str, list[str]] = {}
        missing = raw_read == 0 or any(info is None for info in streams.values())
        full = False
        for stream, entries in [] if missing else raw_read or []:
            queue = by_stream[stream]
            full = full or len(entries) >= count
            for entry_id, fields in entries:
                if not fields:  # a pending entry trimmed before it was applied
                    trimmed.setdefault(queue, []).append(entry_id)
                else:
                    events.extend(events_of(queue, entry_id, _pairs(fields)))
        return FeedRead(int(epoch), streams, missing, events, trimmed, full)

    def ack(self, ids: Mapping[str, Sequence[str]]) -> None:
        """Acknowledge applied entries, per queue."""
        pipe = self.redis.pipeline(transaction=False)
        for queue, entry_ids in ids.items():
            if entry_ids:
                pipe.xack(queue_keys(queue).events, self.group, *entry_ids)
        pipe.execute()

    def wait(self, seen: Mapping[str, str], block_ms: int) -> bool:
        """Block until a queue's stream has an entry after the id `seen` names (or '$': any new one), or a
        fast enqueue wrote to its intake (which has no event yet): True; or `block_ms` passes: False."""
        if cluster.is_cluster(self.redis):  # one slot per queue: a blocking read per queue (cluster.py)
            groups = [{queue_keys(q).events: last, queue_keys(q).intake: "$"} for q, last in seen.items()]
            return cluster.xread_any(self.redis, groups, block_ms / 1000)
        streams = {queue_keys(q).events: last for q, last in seen.items()}
        streams |= {queue_keys(q).intake: "$" for q in seen}
        return bool(self.redis.xread(cast(Any, streams), count=1, block=block_ms))

    def drain(self, queues: Sequence[str]) -> int:
        """Turn every queue's intake entries into jobs (and events) now; returns how many."""
        total = 0
        for reply in self.store.run_many([self.store.drain_call(q) for q in queues]):
            if isinstance(reply, Exception):
                raise reply
            total += reply
        return total

    def ensure_group(self, queue: str, start: str, *, recreate: bool = False) -> bool:
        """The group on the queue's stream, reading after `start` if it has to be made (or `recreate`)."""
        return self.store.mirror_group(queue, group=self.group, start=start, recreate=recreate)

    def group_exists(self, queue: str) -> bool:
        try:
            groups = self.redis.xinfo_groups(queue_keys(queue).events)
        except redis.ResponseError:
            return False
        return any(g["name"] == self.group for g in groups)

    def last_id(self, queue: str) -> str:
        """The id of the newest entry ever added to the queue's stream ('0-0' when there is no stream)."""
        try:
            return str(self.redis.xinfo_stream(queue_keys(queue).events)["last-generated-id"])
        except redis.ResponseError:
            return "0-0"

    def advance_epoch(self, to: int | None = None) -> int:
        """Count Redis's epoch up (or set it to `to`); a script, so it works while Redis is full."""
        return self.store.mirror_epoch(to)
