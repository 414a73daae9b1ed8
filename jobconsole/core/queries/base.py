"""What every reader of the read API shares: the store it reads through, and draining a queue's intake first."""

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
