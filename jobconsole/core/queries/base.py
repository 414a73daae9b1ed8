"""What every reader of the read API shares: the store it reads through, and draining a queue's intake first."""

from collections.abc import Sequence

import redis

from jobconsole.core import redis_health
from jobconsole.core.store import Store


class Reader:
    """Reads one noun (queues, jobs, workers, ...) for operators and programs. Thread-safe (redis-py's pool)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.redis = store.redis

    def _drain(self, queue: str) -> None:
        """Turn the queue's intake into jobs before a read, unless Redis refuses writes (full, unable to persist,
        a replica, too few replicas): the read then goes on without the intake's newest jobs, so that the console
        shows what Redis holds and why it refuses writes (jobconsole/service_health.py) instead of failing."""
        try:
            self.store.drain(queue)
        except redis.ResponseError as exc:
            if redis_health.refusal_kind(exc) == redis_health.OTHER:
                raise

    def _drain_many(self, queues: Sequence[str]) -> None:
        """`_drain` of several queues in one round trip."""
        if not queues:
            return
        for reply in self.store.run_many([self.store.drain_call(q) for q in queues]):
            if isinstance(reply, redis.ResponseError) and redis_health.refusal_kind(reply) != redis_health.OTHER:
                continue
            if isinstance(reply, Exception):
                raise reply
