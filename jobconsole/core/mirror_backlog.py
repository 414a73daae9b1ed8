"""What the database mirror has not applied yet, read from Redis: per queue, the time of the oldest entry after
the mirror's cursor in the queue's events stream, or in its intake (a job a fast enqueue left there has no event
until the mirror drains it). Stream ids begin with Redis's clock in ms, so that time is the entry id's first
part. One pipelined round trip of two `XRANGE ... COUNT 1` per queue, and whether a mirror holds its lock."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import redis

from jobconsole.core import keys
from jobconsole.core.keys import queue_keys
from jobconsole.core.queries import Queries
from jobconsole.core.streams import parse_id


@dataclass(frozen=True, slots=True)
class MirrorBacklog:
    oldest_ms: dict[str, int]  # queue -> Redis ms of its oldest entry the mirror lacks (queues behind only)
    now_ms: int  # Redis's clock when read
    leader_running: bool  # a mirror holds the leader lock now


def read_backlog(queries: Queries, cursors: Mapping[str, str], queues: Sequence[str]) -> MirrorBacklog:
    """`cursors`: each queue's last applied events id (a queue without one: nothing applied yet)."""
    pipe = queries.redis.pipeline(transaction=False)
    for queue in queues:
        k = queue_keys(queue)
        pipe.xrange(k.events, min=f"({cursors.get(queue, '0-0')}", max="+", count=1)
        pipe.xrange(k.intake, count=1)
    pipe.exists(keys.MIRROR_LOCK)
    *replies, leader = pipe.execute(raise_on_error=False)
    oldest: dict[str, int] = {}
    for i, queue in enumerate(queues):
        found = [ms for ms in (_first_ms(reply) for reply in replies[2 * i : 2 * i + 2]) if ms is not None]
        if found:
            oldest[queue] = min(found)
    return MirrorBacklog(oldest, queries.now_ms(), bool(leader) and not isinstance(leader, Exception))


def _first_ms(reply: object) -> int | None:
    """The ms of the entry an `XRANGE ... COUNT 1` found; None when it found none (or the key is no stream)."""
    if isinstance(reply, redis.ResponseError) or not reply:
        return None
    return parse_id(cast(list[tuple[str, object]], reply)[0][0])[0]
