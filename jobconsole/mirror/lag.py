"""How far the database mirror is behind Redis: the age of the oldest event it has not applied yet.

Each queue's cursor (`MirrorCursor.last_id`, committed with the rows) names the last entry of the queue's events
stream the database has; the next entry after it is the oldest the database lacks. A job a fast enqueue left in
the queue's intake has no event yet (the mirror drains the intake before it reads), so the intake's first entry
counts too. Stream ids begin with Redis's clock in ms, so an entry's age is Redis's time minus that. One database
query, and one pipelined round trip of two `XRANGE ... COUNT 1` per queue."""

from dataclasses import dataclass
from typing import cast

import redis

from jobconsole.core import keys
from jobconsole.core.keys import queue_keys
from jobconsole.core.queries import Queries
from jobconsole.core.streams import parse_id
from jobconsole.models import MirrorCursor


@dataclass(frozen=True, slots=True)
class MirrorLag:
    seconds: float  # age of the oldest event the database lacks; 0 when it has every one
    queue: str | None  # the queue of that event
    behind: int  # queues with events the database lacks
    leader_running: bool  # a mirror holds the leader lock now


def measure(queries: Queries, queues: list[str]) -> MirrorLag:
    cursors = dict(MirrorCursor.objects.filter(queue__in=queues).values_list("queue", "last_id"))
    pipe = queries.redis.pipeline(transaction=False)
    for queue in queues:
        k = queue_keys(queue)
        pipe.xrange(k.events, min=f"({cursors.get(queue, '0-0')}", max="+", count=1)
        pipe.xrange(k.intake, count=1)
    pipe.exists(keys.MIRROR_LOCK)
    *replies, leader = pipe.execute(raise_on_error=False)
    now_ms = queries.now_ms()
    oldest: tuple[int, str] | None = None
    behind = 0
    for i, queue in enumerate(queues):
        firsts = [_first_ms(reply) for reply in replies[2 * i : 2 * i + 2]]
        unapplied = [ms for ms in firsts if ms is not None]
        if not unapplied:
            continue
        behind += 1
        ms = min(unapplied)
        if oldest is None or ms < oldest[0]:
            oldest = (ms, queue)
    if oldest is None:
        return MirrorLag(0.0, None, 0, bool(leader) and not isinstance(leader, Exception))
    seconds = max(now_ms - oldest[0], 0) / 1000
    return MirrorLag(seconds, oldest[1], behind, bool(leader) and not isinstance(leader, Exception))


def _first_ms(reply: object) -> int | None:
    """The ms of the entry an `XRANGE ... COUNT 1` found; None when it found none (or the key is no stream)."""
    if isinstance(reply, redis.ResponseError) or not reply:
        return None
    return parse_id(cast(list[tuple[str, object]], reply)[0][0])[0]
