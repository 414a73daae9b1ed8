"""Reading the events streams: which queues, one batch at a time, and what else the read shows.

Each read is one script (mirror_read.lua) that also describes every stream and counts Redis's epoch up, so
the checks see the streams as the read did: a stream trimmed past the queue's cursor (a gap: that queue
resyncs), a pending entry trimmed before it was applied (a gap too, unless it was applied and only its ack
lost), a stream or group gone, and an epoch not past the recorded one (Redis lost writes: every queue
resyncs). The reader only says so; the mirror (loop.py) has resync.py act on it."""

import logging
import time
from dataclasses import dataclass, field

from jobconsole.core.feed import EventFeed, StreamInfo
from jobconsole.core.queries import Queries
from jobconsole.core.queries.events import Event
from jobconsole.core.streams import parse_id
from jobconsole.mirror.cursors import NONE, Cursors
from jobconsole.mirror.leader import Leadership

log = logging.getLogger(__name__)

DISCOVER_EVERY = 1.0  # seconds between looks for new queues


@dataclass(slots=True)
class Batch:
    """One read: events to apply, and the queues to resync first (with the reason to record)."""

    events: list[Event] = field(default_factory=list)
    resync: list[tuple[str, str]] = field(default_factory=list)
    rewound: bool = False  # Redis lost writes the database had seen: nothing was read, every queue resyncs
    lost: bool = False  # a stream or its group is gone: nothing was read; read the pending entries again after
    trimmed: int = 0  # pending entries found trimmed (outside the queues whose stream has a gap)
    full: bool = False  # a stream gave a whole batch of entries: more may be waiting


class Reader:
    def __init__(
        self,
        feed: EventFeed,
        queries: Queries,
        leadership: Leadership,
        cursors: Cursors,
        *,
        batch: int = 1000,
        block_ms: int = 100,
    ) -> None:
        self.feed = feed
        self.queries = queries
        self.leadership = leadership
        self.cursors = cursors
        self.batch = batch
        self.block_ms = block_ms
        self.queues: list[str] = []
        self.pending = True  # read the entries delivered before and never acknowledged first (one leader's)
        self._discovered = 0.0

    def reset(self) -> None:
        """Forget the queues and read the pending entries first (a new leader)."""
        self.queues = []
        self.pending = True
        self._discovered = 0.0

    def discover(self, *, now: bool = False) -> list[str]:
        """Queues not read yet (looked for every DISCOVER_EVERY seconds, or `now`); the caller sets each up,
        then adds it."""
        if not now and time.monotonic() - self._discovered < DISCOVER_EVERY:
            return []
        self._discovered = time.monotonic()
        # The database's queues too: a Redis that lost everything (a new empty server) lists none, and the
        # rewind is noticed by reading a queue's stream.
        found = sorted(set(self.queries.queues.names()) | set(self.cursors.applied))
        return [queue for queue in found if queue not in self.queues]

    def read(self, *, pending: bool) -> Batch:
        """The next batch of every queue's stream: the entries read before and not acknowledged (pending), or
        new ones; with the resyncs its checks call for."""
        read = self.feed.read(self.queues, count=self.batch, pending=pending)
        if not self.leadership.observe(read.epoch):
            log.warning(
                "mirror: redis epoch %d is not past the recorded %d: redis lost data; resyncing",
                read.epoch,
                self.leadership.epoch,
            )
            return Batch(rewound=True)
        if read.group_missing:
            # The stream or its group is gone (Redis restarted without it, or someone deleted it).
            broken = [q for q, info in read.streams.items() if info is None]
            lost = [q for q in broken or list(read.streams) if broken or not self.feed.group_exists(q)]
            return Batch(resync=[(q, "stream-lost") for q in lost], lost=True)
        resync: list[tuple[str, str]] = []
        skip: set[str] = set()
        for queue, info in read.streams.items():
            assert info is not None
            self.cursors.seen[queue] = info.last_id
            reason = self._gap(queue, info)
            if reason:
                resync.append((queue, reason))
                skip.add(queue)
        trimmed = 0
        for queue, ids in read.trimmed.items():
            if queue in skip:
                continue
            trimmed += len(ids)
            cursor = self.cursors.get(queue)
            if any(parse_id(i) > cursor for i in ids):
                resync.append((queue, "gap"))
                skip.add(queue)
            else:
                self.feed.ack({queue: ids})  # applied before; only the ack was lost
        events = [e for e in read.events if e.queue not in skip] if skip else read.events
        return Batch(events, resync, trimmed=trimmed, full=read.full)

    def _gap(self, queue: str, info: StreamInfo) -> str | None:
        cursor = self.cursors.get(queue)
        last = parse_id(info.last_id)
        if last < cursor:
            return "redis-rewound"
        if info.entries_added <= info.length:
            return None  # nothing was ever trimmed from this stream
        if cursor == NONE:
            return "gap"  # we never applied anything, and some entries are gone
        # An empty stream: everything up to the last id is gone.
        first_id = parse_id(info.first_id) if info.first_id else (last[0], last[1] + 1)
        # Conservative: the entry at the cursor itself may be the only one trimmed (then resync is redundant).
        return "gap" if cursor < first_id and cursor < last else None

    def drain_intakes(self) -> int:
        """Make the jobs waiting in the queues' intakes (no event yet) into jobs and events now."""
        return self.feed.drain(self.queues)

    def wait(self) -> bool:
        """Block until any stream has an entry newer than what we have seen (True), or block_ms passes."""
        return self.feed.wait({q: self.cursors.seen.get(q, "$") for q in self.queues}, self.block_ms)
