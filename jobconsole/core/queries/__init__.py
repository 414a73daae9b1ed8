"""The engine's read API, by noun (as Sidekiq's api.rb has Queue, JobRecord, DeadSet, ProcessSet, Stats): what the
console, the admin, the mirror, the cleaner and the HTTP API read, never naming a key.

`Queries` holds one reader per noun: `queues` (names, counts, pause, gauges, flow control), `jobs` (one job, jobs
by id, pages of a state, the timed sets across queues), `workers`, `stats` (per-minute counters), `events` (each
queue's stream), `tasks` (announced tasks) and `workflows` (a workflow's steps, a job's links), and Redis's
clock. Each reader's types live in its module
(`queries.jobs.JobPage`, `queries.queues.QueueCounts`, ...): import them from there.
"""

import time
from datetime import UTC, datetime

from jobconsole.core.queries.events import Events
from jobconsole.core.queries.jobs import Jobs
from jobconsole.core.queries.queues import Queues
from jobconsole.core.queries.statistics import Statistics
from jobconsole.core.queries.tasks import Tasks
from jobconsole.core.queries.workers import Workers
from jobconsole.core.queries.workflows import Workflows
from jobconsole.core.store import Store

__all__ = ["Queries"]


class Queries:
    """Reads for operators and programs, by noun. Thread-safe (redis-py's pool)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.redis = store.redis
        self.queues = Queues(store)
        self.jobs = Jobs(store, self.queues)
        self.workers = Workers(store)
        self.stats = Statistics(store)
        self.events = Events(store)
        self.tasks = Tasks(store)
        self.workflows = Workflows(store)

    def now(self) -> datetime:
        """Redis's clock, in which every lease deadline and run-at is counted."""
        return datetime.fromtimestamp(self.store.time_ms() / 1000, tz=UTC)

    def now_ms(self) -> int:
        """Redis's clock (ms): the clock of every deadline and counter minute."""
        return self.store.time_ms()

    def ping(self) -> float:
        """Seconds one round trip to Redis takes; raises redis.RedisError when it does not answer."""
        started = time.monotonic()
        self.redis.ping()
        return time.monotonic() - started
