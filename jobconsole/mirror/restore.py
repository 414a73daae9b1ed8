"""Putting back into Redis the jobs it lost: after a rollback (an AOF restored from a copy, a power loss with
`appendfsync everysec`, a new empty server) the database still knows every job the mirror had applied.
Jobs it knew as waiting or running are enqueued again under their own ids, with their task, parameters,
queue, priority, retries, unique key and (for a later run_at) their schedule. Enqueue is idempotent by id,
so a job Redis still has, or one restored twice, stays one job. Finished jobs stay history (in_redis=false).

A restored job starts a new attempt count in Redis; the attempts the database recorded before the loss stay
in its Attempt rows. A job that was running may still be running in a worker that survived the loss: its
lease is gone from Redis, so its next heartbeat or ack is refused and the restored copy runs again
(at-least-once, like any lease lost)."""

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import redis

from jobconsole.core import Client, JobSpec
from jobconsole.core.errors import InvalidJob
from jobconsole.core.states import STATES, JobState
from jobconsole.models import Job

log = logging.getLogger(__name__)

# Jobs that were ready, delayed, retrying or running are enqueued again as they were; a job waiting for other jobs
# is not (enqueued, it would run before them): the workflow that holds it restores it.
RESTORABLE = frozenset(s for s, i in STATES.items() if i.zset in ("ready", "scheduled", "active"))


@dataclass(frozen=True, slots=True)
class Restored:
    ids: frozenset[str]  # jobs Redis holds again under their own ids (enqueued now, or already back)
    created: int  # how many of them this call enqueued


def restore_lost_jobs(connection: "redis.Redis", rows: Sequence[Job]) -> Restored:
    """Enqueue again the waiting or running jobs among `rows` (jobs Redis no longer has)."""
    client = Client(connection, strict=False)  # the mirror need not import every task module
    now = datetime.now(UTC)
    specs: list[JobSpec] = []
    for row in rows:
        if row.state not in RESTORABLE:
            continue
        try:
            params = json.loads(row.params or "{}")
        except ValueError:
            log.error("cannot restore job=%s: its mirrored params are not JSON", row.id)
            continue
        later = row.run_at if row.run_at is not None and row.run_at > now else None
        specs.append(
            JobSpec(
                task=row.task, params=params, id=row.id, queue=row.queue, priority=row.priority,
                max_retries=row.max_retries, unique_key=row.unique_key or None,
                run_at=later if STATES[JobState(row.state)].zset == "scheduled" else None,
            )
        )  # fmt: skip
    valid: list[JobSpec] = []
    for spec in specs:
        try:
            client.check(spec)
        except InvalidJob as exc:
            log.error("cannot restore job=%s: %s", spec.id, exc)
            continue
        valid.append(spec)
    results = client.enqueue_many(valid)
    restored = sum(result.created for result in results)
    if restored:
        log.warning("restored %d job(s) Redis had lost, from the database", restored)
    # A unique key another job took meanwhile answers with that job ('duplicate'): this one is not back.
    back = frozenset(result.id for result in results if result.status != "duplicate")
    return Restored(back, restored)
