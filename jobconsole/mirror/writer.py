"""Applying a batch of events to the database.

The mirror does not replay event contents: for each job a batch touches it reads the job's current hash (and
attempt history) from Redis in one pipeline and upserts it, so applying an old event again just rewrites the
same (or a newer) state. The rows and each queue's cursor commit in one transaction, fenced by the leadership
row; the entries are acknowledged only after the commit (a mirror killed in between applies them again)."""

import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import connection, models, transaction

from jobconsole.core.feed import EventFeed
from jobconsole.core.job import attempt_history, ms_to_datetime
from jobconsole.core.queries import Queries
from jobconsole.core.queries.events import Event, stream_time
from jobconsole.core.states import TERMINAL_STATES, JobState
from jobconsole.core.streams import StreamId, parse_id
from jobconsole.db_connections import close_broken
from jobconsole.mirror import workflows
from jobconsole.mirror.cursors import Cursors
from jobconsole.mirror.leader import Leadership
from jobconsole.mirror.rows import (
    ATTEMPT_FIELDS,
    FINISHED_AT,
    JOB_FIELDS,
    STATE,
    attempt_values,
    completed_attempt_values,
    datetime_to_sqlite,
    dead_letter_row,
    hash_values,
    ms_to_sqlite,
    sqlite_time,
)
from jobconsole.models import Attempt, DeadLetter, Job, Queue

FINAL_CACHE = 200_000  # ids of jobs last written in a final state (skips re-reading them for old events)
CHANGES_FINAL = frozenset({"requeued", "deleted", "expired", "edited"})
CHUNK = 500  # ids per IN (...) clause
FINAL_NAMES = frozenset(state.value for state in TERMINAL_STATES)
COMPLETED = JobState.COMPLETED.value


@dataclass(slots=True)
class _JobEvents:
    queue: str
    last: Event
    history: bool = False  # some event closed an attempt: read the attempt list too
    changes_final: bool = False  # an event that can change a finished job (requeue, delete, expiry, edit)
    requeued_at: datetime | None = None
    created: bool = False  # enqueued in this batch: read its links to its parents


@dataclass(frozen=True, slots=True)
class Changes:
    """What one batch writes, built from Redis before its transaction."""

    synced: datetime
    rows: list[tuple[Any, ...]]  # Job rows (rows.job_values; on SQLite with its times as the text it stores)
    attempts: list[tuple[Any, ...]]  # Attempt rows (rows.attempt_values)
    dead: list[DeadLetter]
    deleted: list[str]  # ids of jobs deleted from Redis
    gone: dict[str, list[str]]  # state to record (or '') -> ids whose hash is gone (expired or TTL)
    requeued: dict[str, datetime]  # job id -> when it was requeued out of the dead letters
    paused: dict[str, Event]  # queue -> its last pause or resume
    entries: dict[str, list[str]]  # queue -> the entry ids applied
    tops: dict[str, StreamId]  # queue -> the newest entry applied
    finished: list[tuple[str, datetime]]  # (job id, Redis finish time) of the jobs written final
    touched: frozenset[str]  # ids of the jobs whose current state this batch read
    linked: workflows.WorkflowChanges = field(default_factory=workflows.WorkflowChanges)


@dataclass(slots=True)
class BatchStats:
    events: int
    jobs: int
    rows: int
    seconds: float
    committed_at: float  # time.time() just after the commit
    finished: list[tuple[str, datetime]] = field(default_factory=list)  # (job id, Redis finish time)


class Writer:
    def __init__(self, queries: Queries, feed: EventFeed, leadership: Leadership, cursors: Cursors) -> None:
        self.queries = queries
        self.feed = feed
        self.leadership = leadership
        self.cursors = cursors
        self.events_applied = 0
        self.rows_written = 0
        self.on_batch: Callable[[BatchStats], None] | None = None  # after each acknowledged batch (bench/)
        self._final: OrderedDict[str, None] = OrderedDict()
        self._committer: ThreadPoolExecutor | None = None
        self._inflight: tuple[Changes, int, float, Future[float]] | None = None

    def forget(self) -> None:
        """Drop the cache of final jobs (a new leader, or Redis may have forgotten jobs it says are final)."""
        self._final.clear()

    def apply(self, events: list[Event], *, overlap: bool = False) -> int:
        """Write the current Redis state of every job these events touch, commit, then acknowledge.

        `overlap`: commit in the writer's own thread and return at once, so that the next batch is read and
        built while the database commits this one (Redis and the database work at the same time). The commit
        before is waited for first: one batch at most is in flight, and batches commit in order. `flush()`
        waits for it; the mirror flushes before anything else touches the database, and at the end of a step.
        """
        started = time.monotonic()
        changes, jobs = self._changes(events)
        if not overlap:
            self.flush(newer=changes)
            self._settle(changes, jobs, started, self._commit(changes))
            return len(events)
        self.flush(newer=changes)
        if self._committer is None:
            self._committer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jc-mirror-commit")
        self._inflight = (changes, jobs, started, self._committer.submit(self._commit, changes))
        return len(events)

    def flush(self, newer: Changes | None = None) -> None:
        """Wait for the batch in flight, if any, and settle it (raises what its commit raised; its entries then
        stay pending). `newer`: a batch built after it, whose reads of the jobs both touch supersede its own."""
        if self._inflight is None:
            return
        changes, jobs, started, future = self._inflight
        self._inflight = None
        self._settle(changes, jobs, started, future.result(), newer)

    def close(self) -> None:
        """Stop the commit thread (closing its database connection)."""
        if self._committer is not None:
            try:
                self.flush()
            finally:
                self._committer.submit(lambda: connection.close()).result()  # the thread's own connection
                self._committer.shutdown()
                self._committer = None

    def close_broken(self) -> bool:
        """Close the commit thread's database connection if it no longer works (after a failed commit); True
        if it was broken. The mirror's thread closes its own (db_connections.recover)."""
        if self._committer is None:
            return False
        return self._committer.submit(close_broken).result()

    def _commit(self, changes: Changes) -> float:
        with transaction.atomic():
            self.save(changes)
        return time.time()

    def _settle(
        self, changes: Changes, jobs: int, started: float, committed_at: float, newer: Changes | None = None
    ) -> None:
        """After the commit: remember the final jobs, move the cursors, acknowledge the entries."""
        superseded = newer.touched if newer is not None else frozenset()
        for job_id, _ in changes.finished:
            if job_id not in superseded:  # a later read may have seen it requeued: that read decides
                self._final[job_id] = None
        for job_id in changes.deleted:
            self._final.pop(job_id, None)
        while len(self._final) > FINAL_CACHE:
            self._final.popitem(last=False)
        for queue, top in changes.tops.items():
            self.cursors.advance(queue, top)
        self.acknowledge(changes)
        events = sum(len(ids) for ids in changes.entries.values())
        self.events_applied += events
        written = len(changes.rows) + len(changes.attempts) + len(changes.dead) + len(changes.deleted)
        self.rows_written += written
        if self.on_batch:
            self.on_batch(BatchStats(events, jobs, written, time.monotonic() - started, committed_at, changes.finished))

    def _changes(self, events: list[Event]) -> tuple[Changes, int]:
        """The rows these events call for, from the jobs' current hashes; and how many jobs they touch."""
        synced = datetime.now(UTC)
        jobs: dict[str, _JobEvents] = {}
        entries: dict[str, list[str]] = {}
        paused: dict[str, Event] = {}
        # The mirror's per-event loop: each event's fields read once into locals.
        applied: list[str] = []
        queue = ""
        for e in events:
            fields = e.fields
            if e.queue != queue:
                queue = e.queue
                applied = entries.setdefault(queue, [])
            if not applied or applied[-1] != e.id:  # the events of a batch entry share its id
                applied.append(e.id)
            job_id = fields.get("job")
            name = fields.get("event", "")
            if not job_id:
                if name in ("paused", "resumed"):
                    paused[queue] = e
                continue
            j = jobs.get(job_id)
            if j is None:
                j = jobs[job_id] = _JobEvents(queue, e)
            j.last = e
            if "entry" in fields:
                j.history = True
            if name == "enqueued":
                j.created = True
            elif name in CHANGES_FINAL:
                j.changes_final = True
                self._final.pop(job_id, None)
                if name == "requeued" and fields.get("from") == "dead":
                    j.requeued_at = stream_time(e.id)
        # (The batch in flight, if any, counts too: its final jobs join the cache once it has committed.)
        in_flight = {i for i, _ in self._inflight[0].finished} if self._inflight is not None else set()
        for job_id in [i for i, j in jobs.items() if (i in self._final or i in in_flight) and not j.changes_final]:
            # Already written in a final state, and nothing in this batch can change a final job:
            # these are older events of it (the mirror read its hash when it was already finished).
            del jobs[job_id]
        read = self.queries.jobs.hashes(
            [(j.queue, job_id) for job_id, j in jobs.items()], history={i for i, j in jobs.items() if j.history}
        )
        found = dict(zip(jobs, read, strict=True))  # job id -> (its hash, empty when gone; its raw history)
        # A job already final when we read it is written (and remembered) as final now, so later events
        # that carry its attempts will be skipped: read its history now if no event of this batch did.
        late = [i for i, (h, history) in found.items() if h and history is None and h.get("state") in FINAL_NAMES]
        late_histories = self.queries.jobs.raw_histories([(jobs[i].queue, i) for i in late])
        for job_id, raw in zip(late, late_histories, strict=True):
            found[job_id] = (found[job_id][0], raw)
        # On SQLite the rows carry their times as the text SQLite stores (the Job rows' made straight from Redis's
        # milliseconds), so the upsert passes them through as they are.
        text = connection.vendor == "sqlite"
        time, synced_value = (ms_to_sqlite, sqlite_time(synced)) if text else (ms_to_datetime, synced)
        attempt_time = datetime_to_sqlite if text else None
        rows: list[tuple[Any, ...]] = []
        attempts: list[tuple[Any, ...]] = []
        dead: list[DeadLetter] = []
        deleted: list[str] = []
        gone: dict[str, list[str]] = {}
        requeued: dict[str, datetime] = {}
        finished: list[tuple[str, datetime]] = []
        for job_id, j in jobs.items():
            if j.requeued_at is not None:
                requeued[job_id] = j.requeued_at
            h, history = found[job_id]
            if not h:
                if j.last.name == "deleted":
                    deleted.append(job_id)
                else:
                    state = j.last.fields.get("state", "")
                    gone.setdefault(state if state in JobState._value2member_map_ else "", []).append(job_id)
                continue
            row = hash_values(h, synced_value, time)
            rows.append(row)
            if history is not None and not history and h.get("state") == COMPLETED:
                # The usual job: its one attempt succeeded and its hash records it (core/job.py attempt_history).
                job_attempts = completed_attempt_values(job_id, h, time)
            else:
                job_attempts = attempt_values(job_id, attempt_history(h, history), attempt_time)
            attempts.extend(job_attempts)
            state = row[STATE]
            if state not in FINAL_NAMES:
                continue
            finished_at = ms_to_datetime(h.get("finished_at")) if text else row[FINISHED_AT]
            # (A dead letter takes the job's times as datetimes, its last attempt's texts only.)
            last_attempt = job_attempts[-1] if job_attempts else None
            if state == JobState.DEAD and (
                letter := dead_letter_row(hash_values(h, synced) if text else row, last_attempt)
            ):
                dead.append(letter)
            if finished_at is not None:
                finished.append((job_id, finished_at))
        tops = {queue: max(parse_id(i) for i in ids) for queue, ids in entries.items()}
        linked = workflows.read(self.queries, [(h, jobs[i].created) for i, (h, _) in found.items() if h])
        changes = Changes(
            synced,
            rows,
            attempts,
            dead,
            deleted,
            gone,
            requeued,
            paused,
            entries,
            tops,
            finished,
            frozenset(jobs),
            linked,
        )
        return changes, len(jobs)

    def save(self, changes: Changes) -> None:
        """Write a batch in the current transaction, fenced, with each queue's cursor."""
        self.leadership.fence()
        self.write(changes.rows, changes.attempts, changes.dead, stored_times=True)
        changes.linked.save(changes.synced)
        # One UPDATE per requeue time, not per job: a bulk resubmit requeues hundreds of jobs in the same millisecond.
        by_time: dict[datetime, list[str]] = {}
        for job_id, requeued_at in changes.requeued.items():
            by_time.setdefault(requeued_at, []).append(job_id)
        for requeued_at, ids in by_time.items():
            for start in range(0, len(ids), CHUNK):
                DeadLetter.objects.filter(
                    job_id__in=ids[start : start + CHUNK], resubmitted_at__isnull=True, died_at__lte=requeued_at
                ).update(resubmitted_at=requeued_at)
        for start in range(0, len(changes.deleted), CHUNK):
            Job.objects.filter(id__in=changes.deleted[start : start + CHUNK]).delete()
        for state, ids in changes.gone.items():
            fields: dict[str, Any] = {"in_redis": False, "synced_at": changes.synced}
            if state:
                fields["state"] = state
            for start in range(0, len(ids), CHUNK):
                Job.objects.filter(id__in=ids[start : start + CHUNK]).update(**fields)
        for queue, e in changes.paused.items():
            Queue.objects.update_or_create(
                name=queue, defaults={"paused": e.name == "paused", "changed_at": stream_time(e.id)}
            )
        for queue, ids in changes.entries.items():
            self.cursors.save(queue, changes.tops[queue], len(ids))

    def acknowledge(self, changes: Changes) -> None:
        """Acknowledge a committed batch's entries (until then they stay pending, for the next leader)."""
        self.feed.ack(changes.entries)

    @staticmethod
    def write(
        rows: list[tuple[Any, ...]],
        attempts: list[tuple[Any, ...]],
        dead: list[DeadLetter],
        *,
        stored_times: bool = False,
    ) -> None:
        """Upsert Job and Attempt rows, and add dead letters (in the caller's transaction). `stored_times`: the rows'
        times are already what the database stores (on SQLite, its text: `_changes`)."""
        if rows:
            _upsert(Job, ["id", *JOB_FIELDS], ["id"], JOB_FIELDS, rows, stored_times=stored_times)
        if attempts:
            columns = ["job_id", "number", *ATTEMPT_FIELDS]
            _upsert(Attempt, columns, ["job_id", "number"], ATTEMPT_FIELDS, attempts, stored_times=stored_times)
        if dead:
            DeadLetter.objects.bulk_create(dead, ignore_conflicts=True)


def _upsert(
    model: type[models.Model],
    columns: list[str],
    conflict: list[str],
    update: list[str],
    rows: list[tuple[Any, ...]],
    *,
    stored_times: bool = False,
) -> None:
    """INSERT ... ON CONFLICT DO UPDATE in raw SQL: the ORM's bulk_create(update_conflicts=True) compiles every
    value on its own, and this is the mirror's hot path."""
    qn = connection.ops.quote_name
    table = qn(model._meta.db_table)
    names = ", ".join(qn(c) for c in columns)
    tail = (
        f" ON CONFLICT ({', '.join(qn(c) for c in conflict)}) "
        f"DO UPDATE SET {', '.join(f'{qn(c)} = EXCLUDED.{qn(c)}' for c in update)}"
    )
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # COPY into a temporary table (psycopg formats the rows in C), then one INSERT ... SELECT: the
            # server parses one statement per batch, and no value goes through Python's array formatting.
            # (Made in the transaction, so a batch that rolls back takes it along; asking each time costs one
            # round trip per batch.)
            stage = qn(f"jc_stage_{model._meta.db_table}")
            cursor.execute(
                f"CREATE TEMPORARY TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS AS "
                f"SELECT {names} FROM {table} WITH NO DATA"
            )
            with cursor.cursor.copy(f"COPY {stage} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            cursor.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM {stage}{tail}")
            return
        # SQLite (and others): sqlite3's C loop over one prepared statement. Datetimes are stored as
        # Django stores them (naive UTC text), so lookups and ordering keep working.
        values: list[Any] = rows
        if not (stored_times and connection.vendor == "sqlite"):
            adapt = connection.ops.adapt_datetimefield_value
            at = [i for i, c in enumerate(columns) if isinstance(model._meta.get_field(c), models.DateTimeField)]
            values = [list(row) for row in rows]
            for value in values:
                for i in at:
                    v = value[i]
                    if v is not None:
                        # Django's own text for a UTC datetime, without its per-value checks (the mirror's
                        # datetimes are all UTC); anything else goes through Django.
                        value[i] = sqlite_time(v) if v.tzinfo is UTC else adapt(v)
        cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(columns))}){tail}", values)
