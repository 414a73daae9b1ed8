"""How far the database mirror is behind Redis: the age of the oldest event it has not applied yet.

Each queue's cursor (`MirrorCursor.last_id`, committed with the rows) names the last entry of the queue's events
stream the database has; the next entry after it is the oldest the database lacks. A job a fast enqueue left in
the queue's intake has no event yet (the mirror drains the intake before it reads), so the intake's first entry
counts too. Stream ids begin with Redis's clock in ms, so an entry's age is Redis's time minus that. One database
query, and the engine's read of the backlog (core/mirror_backlog.py): one round trip."""

from dataclasses import dataclass

from jobconsole.core.mirror_backlog import read_backlog
from jobconsole.core.queries import Queries
from jobconsole.models import MirrorCursor


@dataclass(frozen=True, slots=True)
class MirrorLag:
    seconds: float  # age of the oldest event the database lacks; 0 when it has every one
    queue: str | None  # the queue of that event
    behind: int  # queues with events the database lacks
    leader_running: bool  # a mirror holds the leader lock now


def measure(queries: Queries, queues: list[str]) -> MirrorLag:
    cursors = dict(MirrorCursor.objects.filter(queue__in=queues).values_list("queue", "last_id"))
    backlog = read_backlog(queries, cursors, queues)
    if not backlog.oldest_ms:
        return MirrorLag(0.0, None, 0, backlog.leader_running)
    queue, ms = min(backlog.oldest_ms.items(), key=lambda item: (item[1], queues.index(item[0])))
    seconds = max(backlog.now_ms - ms, 0) / 1000
    return MirrorLag(seconds, queue, len(backlog.oldest_ms), backlog.leader_running)
