"""Resynchronising a queue from Redis when its events cannot be trusted to be complete, and handling a rewind.

A queue resyncs when the mirror first meets it ("initial"), when its stream was trimmed past the cursor
("gap"), when its stream or group is gone ("stream-lost") and when Redis lost writes the database had seen
("redis-rewound"). Its rows are rebuilt from the Redis sets and job hashes, the rows Redis no longer holds
are marked (or, for waiting jobs after a gap, deleted), the consumer group restarts just after the snapshot,
and a `MirrorResync` records it. After a rewind the jobs the database knew as waiting or running that Redis
lost are enqueued again under their ids first (restore.py)."""

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import transaction

from jobconsole.core.feed import EventFeed
from jobconsole.core.queries import Queries
from jobconsole.core.states import WAITING_STATES, JobState
from jobconsole.core.store import Store
from jobconsole.core.streams import format_id
from jobconsole.mirror import workflows
from jobconsole.mirror.cursors import Cursors
from jobconsole.mirror.leader import Leadership
from jobconsole.mirror.restore import Restored, restore_lost_jobs
from jobconsole.mirror.rows import STATE, attempt_values, dead_letter_row, job_values
from jobconsole.mirror.writer import CHUNK, Writer
from jobconsole.models import DeadLetter, Job, MirrorResync, Queue

log = logging.getLogger(__name__)

RESYNC_CHUNK = 500  # jobs read from Redis and written per transaction
WAITING = frozenset(s.value for s in WAITING_STATES)


class Resync:
    def __init__(
        self,
        store: Store,
        feed: EventFeed,
        queries: Queries,
        leadership: Leadership,
        cursors: Cursors,
        writer: Writer,
        *,
        restore: bool = True,
    ) -> None:
        self.store = store
        self.feed = feed
        self.queries = queries
        self.leadership = leadership
        self.cursors = cursors
        self.writer = writer
        self.restore = restore  # enqueue again the waiting/running jobs Redis lost (see restore.py)
        self.count = 0  # resyncs done

    def start(self, queue: str) -> None:
        """A queue the mirror is about to read: resync it if the database never saw it, else make sure its
        consumer group exists (reading after the cursor if it has to be made)."""
        if queue in self.cursors.applied:
            self.feed.ensure_group(queue, format_id(self.cursors.applied[queue]))
        else:
            self.queue(queue, "initial")
        Queue.objects.get_or_create(name=queue)

    def queue(self, queue: str, reason: str) -> MirrorResync:
        """Rebuild one queue's rows from Redis: every job in its sets, then rows Redis no longer has.

        Rows for jobs Redis no longer holds are kept as history with in_redis=false, except waiting ones
        after a gap: only an operator's delete removes a waiting job, so those rows are deleted too."""
        if reason != "redis-rewound":  # (a rewind moves the counter once every queue is done: see rewound)
            # The snapshot is as new as this epoch: the database records it with the rows (Leadership.fence).
            self.leadership.observe_snapshot(self.feed.advance_epoch())
        self.store.drain(queue)  # jobs accepted but not yet made into hashes are in no set
        upto = self.feed.last_id(queue)
        from_id = format_id(self.cursors.applied[queue]) if queue in self.cursors.applied else ""
        log.log(
            logging.INFO if reason == "initial" else logging.WARNING,
            "mirror resync queue=%s reason=%s from=%s to=%s",
            queue,
            reason,
            from_id or "-",
            upto,
        )
        ids = self.queries.jobs.ids(queue)
        paused = self.queries.queues.is_paused(queue)
        present: set[str] = set()
        for start in range(0, len(ids), RESYNC_CHUNK):
            present |= self._chunk(queue, ids[start : start + RESYNC_CHUNK])
        known = set(Job.objects.filter(queue=queue, in_redis=True).values_list("id", "state"))
        missing = [(i, s) for i, s in known if i not in present]
        # What Redis lost goes back before any row is marked: a mirror killed in between leaves the rows as
        # they were, and the next leader (which still sees the rewind, see rewound) puts them back. Their
        # events follow `upto`, so the group recreated below reads them.
        restored = Restored(frozenset(), 0)
        if reason == "redis-rewound" and self.restore and missing:
            restored = restore_lost_jobs(self.store.redis, list(Job.objects.filter(id__in=[i for i, _ in missing])))
        delete = [i for i, s in missing if reason == "gap" and s in WAITING]
        keep = [i for i, s in missing if not (reason == "gap" and s in WAITING) and i not in restored.ids]
        now = datetime.now(UTC)
        with transaction.atomic():
            self.leadership.fence()
            for start in range(0, len(delete), CHUNK):
                Job.objects.filter(id__in=delete[start : start + CHUNK]).delete()
            for start in range(0, len(keep), CHUNK):
                Job.objects.filter(id__in=keep[start : start + CHUNK]).update(in_redis=False, synced_at=now)
            Queue.objects.update_or_create(name=queue, defaults={"paused": bool(paused)})
            self.cursors.reset(queue, upto)
            record = MirrorResync.objects.create(
                queue=queue,
                reason=reason,
                from_id=from_id,
                to_id=upto,
                jobs=len(present),
                missing=len(missing),
                restored=restored.created,
            )
        # Start the group just after the snapshot's stream position; its old pending entries go with it.
        self.feed.ensure_group(queue, upto, recreate=True)
        self.cursors.resynced(queue, upto)
        self.writer.forget()  # Redis may have forgotten jobs this cache says are final
        self.count += 1
        return record

    def rewound(self, queues: Sequence[str]) -> None:
        """Redis forgot writes the database had seen: resync every queue and put back the jobs it lost.

        Only then does Redis's counter move past the database's: a mirror killed before that leaves the rewind
        for the next leader to notice and handle again (resyncing and restoring are idempotent)."""
        for queue in sorted(set(queues) | set(self.cursors.applied)):
            self.queue(queue, "redis-rewound")
        self.feed.advance_epoch(to=self.leadership.next_epoch())  # only the leader writes it
        with transaction.atomic():
            self.leadership.fence()

    def _chunk(self, queue: str, ids: Sequence[str]) -> set[str]:
        read = self.queries.jobs.by_id([(queue, i) for i in ids], history=True)
        synced = datetime.now(UTC)
        rows: list[tuple[Any, ...]] = []
        attempts: list[tuple[Any, ...]] = []
        dead: list[DeadLetter] = []
        for job in read:
            if job is None:
                continue  # expired by TTL between the ZRANGE and now: the trim will report it
            row = job_values(job, synced)
            rows.append(row)
            job_attempts = attempt_values(job.id, job.history)
            attempts.extend(job_attempts)
            if row[STATE] == JobState.DEAD and (
                letter := dead_letter_row(row, job_attempts[-1] if job_attempts else None)
            ):
                dead.append(letter)
        alive = [r[0] for r in rows if r[STATE] != JobState.DEAD]
        linked = workflows.changes_for_resync(self.queries, [job.raw for job in read if job is not None])
        with transaction.atomic():
            self.leadership.fence()
            self.writer.write(rows, attempts, dead)
            linked.save(synced)
            if alive:
                DeadLetter.objects.filter(job_id__in=alive, resubmitted_at__isnull=True).update(resubmitted_at=synced)
        return {r[0] for r in rows}
