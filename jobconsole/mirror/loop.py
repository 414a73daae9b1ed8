"""The mirror loop: applies every queue's events stream to the database, in batches, idempotently.

How it stays exact:

* Every state change in Redis appends an event to the queue's stream in the same Lua script. The
  mirror reads the streams through one consumer group (``jc-mirror``), applies a batch in one database
  transaction, and XACKs only after the commit. A mirror killed at any point leaves its batch pending;
  the next leader re-reads the pending entries first (consumer name is fixed) and applies them again.
* Applying is idempotent because the mirror does not replay event contents: for each job in a batch it
  reads the job's current hash (and attempt history) from Redis in one pipeline and upserts it. Applying
  an old event again just rewrites the same (or a newer) state.
* The last applied stream id of each queue is committed in the same transaction as the rows
  (`MirrorCursor`). Before reading a batch, the mirror looks at the stream's first entry in the same
  MULTI as the read: if it is past the cursor, entries were trimmed before being applied (the mirror
  was down too long). It then resynchronises that queue from the Redis sets and job hashes and records
  a `MirrorResync`. (The check is conservative: it may resync when only the cursor's own entry was
  trimmed; it never misses a gap.)
* Redis losing writes (an AOF restored from a copy, a power loss under `appendfsync everysec`, a new empty
  server) is noticed by an epoch: every read increments a counter in Redis in the same MULTI, and every
  batch records the value it read in the database. A value not above the recorded one means Redis forgot
  what the database had seen: every queue resyncs ("redis-rewound"), and the jobs the database knew as
  waiting or running that Redis lost are enqueued again under their ids (mirror/restore.py).
* One leader at a time: an owner-token Redis lock, plus a database fence row (`MirrorLease`) that each
  batch updates only while it still holds the token. A deposed leader's late batch therefore rolls
  back instead of overwriting rows a newer leader wrote.
"""

import logging
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, cast

import redis
from django.db import DatabaseError, InterfaceError, close_old_connections, connection, models, transaction
from django.db.models import F

from jobconsole.core.feed import EventFeed, StreamInfo
from jobconsole.core.job import Job as RedisJob
from jobconsole.core.maintenance import RETRYABLE_ERRORS
from jobconsole.core.queries import Event, Queries, stream_time
from jobconsole.core.states import TERMINAL_STATES, JobState
from jobconsole.core.store import DEFAULT_EVENTS_MAXLEN, Store
from jobconsole.core.streams import StreamId, format_id, parse_id
from jobconsole.mirror.restore import Restored, restore_lost_jobs
from jobconsole.mirror.rows import ATTEMPT_FIELDS, JOB_FIELDS, attempt_values, dead_letter_row, job_values
from jobconsole.models import Attempt, DeadLetter, Job, MirrorCursor, MirrorLease, MirrorResync, Queue

log = logging.getLogger(__name__)

LEASE = "mirror"
DISCOVER_EVERY = 1.0
RESYNC_CHUNK = 500
FINAL_CACHE = 200_000  # ids of jobs last written in a final state (skips re-reading them for old events)
CHANGES_FINAL = frozenset({"requeued", "deleted", "expired", "edited"})
_STATE = 1 + JOB_FIELDS.index("state")
_FINISHED_AT = 1 + JOB_FIELDS.index("finished_at")


class LostLeadership(Exception):
    """Another mirror holds the lock (or the database fence) now; this one must stop writing."""


class SimulatedCrash(BaseException):
    """Raised by test fault hooks to stop the mirror mid-batch, as a kill would."""


@dataclass(slots=True)
class _JobEvents:
    queue: str
    last: Event
    history: bool = False  # some event closed an attempt: read the attempt list too
    changes_final: bool = False  # an event that can change a finished job (requeue, delete, expiry, edit)
    requeued_at: datetime | None = None


@dataclass(slots=True)
class _Periodic:
    every: float  # seconds
    fn: Callable[[], Any]
    last: float = 0.0


@dataclass(slots=True)
class BatchStats:
    events: int
    jobs: int
    rows: int
    seconds: float
    committed_at: float  # time.time() just after the commit
    finished: list[tuple[str, datetime]] = field(default_factory=list)  # (job id, Redis finish time)


class Mirror:
    def __init__(
        self,
        connection_: "redis.Redis",
        *,
        batch: int = 1000,
        block_ms: int = 100,
        lock_ttl: float = 10.0,
        name: str | None = None,
        periodic: Sequence[tuple[float, Callable[[], Any]]] = (),
        events_maxlen: int = DEFAULT_EVENTS_MAXLEN,
        restore: bool = True,
    ) -> None:
        self.store = Store(connection_, events_maxlen=events_maxlen)
        self.queries = Queries(self.store)
        self.feed = EventFeed(self.store)
        self.restore = restore  # enqueue again the waiting/running jobs Redis lost (see restore.py)
        self.events_maxlen = events_maxlen  # for the 'enqueued' events of the intake jobs it drains
        self.batch = batch
        self.block_ms = block_ms
        self.lock_ttl_ms = int(lock_ttl * 1000)
        self.token = uuid.uuid4().hex
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.leader = False
        self.cursors: dict[str, StreamId] = {}
        self.queues: list[str] = []
        self.events_applied = 0
        self.rows_written = 0
        self.resyncs = 0
        self.periodic = [_Periodic(every, fn) for every, fn in periodic]
        # Test hooks: fault(point) is called at 'before_commit' and 'after_commit' of each batch, at 'resynced'
        # after a queue's resync and at 'rewound' once a rollback has been handled;
        # on_batch(stats) after each committed and acknowledged batch.
        self.fault: Callable[[str], None] | None = None
        self.on_batch: Callable[[BatchStats], None] | None = None
        self._renewed = 0.0
        self._discovered = 0.0
        self._read_pending = True
        self._last_generated: dict[str, str] = {}
        self._final: OrderedDict[str, None] = OrderedDict()
        self.epoch = 0  # the Redis epoch the database last recorded (see the module docstring)
        self._read_epoch = 0  # the value the latest read got from Redis

    # --- leadership -------------------------------------------------------------------------------

    def lead(self) -> bool:
        """Take or renew the leader lock; on taking it, take over the database fence too."""
        now = time.monotonic()
        if self.leader and now - self._renewed < self.lock_ttl_ms / 3000:
            return True
        if not self.store.acquire_lock("mirror", self.token, self.lock_ttl_ms):
            if self.leader:
                log.warning("mirror=%s lost the leader lock", self.name)
            self.leader = False
            return False
        if not self.leader:
            stamp = datetime.now(UTC)
            with transaction.atomic():
                # On PostgreSQL this waits for a batch the previous leader may still be committing.
                MirrorLease.objects.update_or_create(
                    name=LEASE,
                    defaults={"token": self.token, "holder": self.name, "acquired_at": stamp, "renewed_at": stamp},
                )
            self.cursors = {q: parse_id(i) for q, i in MirrorCursor.objects.values_list("queue", "last_id")}
            self.epoch = MirrorLease.objects.get(name=LEASE).redis_epoch
            self.queues = []
            self._discovered = 0.0
            self._read_pending = True
            self._final.clear()
            self.leader = True
            log.info("mirror=%s is the leader", self.name)
        self._renewed = now
        return True

    def release(self) -> None:
        if self.leader:
            try:
                self.store.release_lock("mirror", self.token)
            except RETRYABLE_ERRORS:
                pass
        self.leader = False

    def _fence(self) -> None:
        """Renew the database fence in the current transaction (and record the latest Redis epoch read)."""
        fields: dict[str, Any] = {"renewed_at": datetime.now(UTC)}
        if self._read_epoch > self.epoch:
            fields["redis_epoch"] = self.epoch = self._read_epoch
        updated = MirrorLease.objects.filter(name=LEASE, token=self.token).update(**fields)
        if updated != 1:
            self.leader = False
            raise LostLeadership(f"mirror {self.name}: another mirror took the database fence")

    # --- the loop ---------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Mirror until `stop` is set. Redis or database outages are logged and waited out."""
        try:
            while not stop.is_set():
                try:
                    if not self.step() and not self.leader:
                        stop.wait(min(1.0, self.lock_ttl_ms / 3000))
                    self.run_periodic()
                except LostLeadership as exc:
                    log.warning("%s", exc)
                    self.leader = False
                except RETRYABLE_ERRORS as exc:
                    log.warning("mirror: redis unavailable (%s); retrying", exc)
                    self._read_pending = True
                    stop.wait(1.0)
                except (DatabaseError, InterfaceError) as exc:
                    log.warning("mirror: database error (%s); retrying", exc)
                    self._read_pending = True
                    close_old_connections()
                    stop.wait(1.0)
                except Exception:
                    log.exception("mirror pass failed")
                    self._read_pending = True
                    stop.wait(1.0)
        finally:
            self.release()
            connection.close()

    def run_periodic(self) -> None:
        """Side duties of the leader (outbox relay, database retention), each at its own interval."""
        if not self.leader:
            return
        now = time.monotonic()
        for duty in self.periodic:
            if now - duty.last >= duty.every:
                duty.last = now
                try:
                    duty.fn()
                except Exception:
                    log.exception("mirror periodic task %s failed", getattr(duty.fn, "__name__", duty.fn))

    def step(self) -> int:
        """Apply one batch if we lead; returns the number of events applied (0: idle or not leader)."""
        if not self.lead():
            return 0
        self._discover()
        if not self.queues:
            time.sleep(self.block_ms / 1000)
            return 0
        if self._read_pending:
            n = self._step(pending=True)
            if n:
                return n
            self._read_pending = False
        n = self._step(pending=False)
        # Nothing new: jobs may still wait in an intake without an event (no worker claims from the queue,
        # or maintenance has not passed yet); drain them, so the next read sees them, before waiting.
        if not n and self._drain_intakes():
            n = self._step(pending=False)
        if not n:
            self._wait_for_events()
        return n

    def _drain_intakes(self) -> int:
        return self.feed.drain(self.queues)

    def drain(self, max_steps: int = 10_000) -> int:
        """Apply everything currently in the streams (tests and the benchmark); returns events applied."""
        total = 0
        for _ in range(max_steps):
            n = self.step()
            total += n
            if not n and (not self.leader or not self.queues or not self._read_pending):
                return total
        return total

    # --- queues and consumer groups ---------------------------------------------------------------

    def _discover(self, force: bool = False) -> None:
        if not force and time.monotonic() - self._discovered < DISCOVER_EVERY:
            return
        self._discovered = time.monotonic()
        # The database's queues too: a Redis that lost everything (a new empty server) lists none, and the
        # rewind is noticed by reading a queue's stream.
        found = sorted(set(self.queries.queues()) | set(self.cursors))
        for queue in found:
            if queue in self.queues:
                continue
            if queue not in self.cursors:
                self.resync(queue, "initial")
            else:
                self._ensure_group(queue, format_id(self.cursors[queue]))
            self.queues.append(queue)
            Queue.objects.get_or_create(name=queue)

    def _ensure_group(self, queue: str, start: str, *, recreate: bool = False) -> None:
        """The consumer group on the queue's events stream, starting after `start` if it has to be made."""
        self.feed.ensure_group(queue, start, recreate=recreate)

    def _advance_epoch(self, to: int | None = None) -> int:
        """Count Redis's epoch up (or set it to `to`) with a script, so that it works while Redis is full."""
        return self.feed.advance_epoch(to)

    # --- reading ----------------------------------------------------------------------------------

    def _step(self, *, pending: bool) -> int:
        # One script, so that the gap check sees each stream as the read did (mirror_read.lua).
        read = self.feed.read(self.queues, count=self.batch, pending=pending)
        if read.epoch <= self.epoch:
            self._rewound(read.epoch)
            return 0
        self._read_epoch = read.epoch
        if read.group_missing:
            # The stream or its group is gone (Redis restarted without it, or someone deleted it).
            broken = [q for q, info in read.streams.items() if info is None]
            for queue in broken or list(read.streams):
                if broken or not self.feed.group_exists(queue):
                    self.resync(queue, "stream-lost")
            self._read_pending = True
            return 0
        skip: set[str] = set()
        for queue, info in read.streams.items():
            assert info is not None
            self._last_generated[queue] = info.last_id
            reason = self._gap(queue, info)
            if reason:
                self.resync(queue, reason)
                skip.add(queue)
        events = [e for e in read.events if e.queue not in skip]
        trimmed = {q: ids for q, ids in read.trimmed.items() if q not in skip}
        for queue, ids in trimmed.items():
            cursor = self.cursors.get(queue, (0, 0))
            if any(parse_id(i) > cursor for i in ids):
                self.resync(queue, "gap")
                events = [e for e in events if e.queue != queue]
            else:
                self.feed.ack({queue: ids})  # applied before; only the ack was lost
        if not events:
            return sum(len(ids) for ids in trimmed.values())
        return self.apply(events)

    def _rewound(self, epoch: int) -> None:
        """Redis forgot writes the database had seen: resync every queue and put back the jobs it lost.

        Only then does Redis's counter move past the database's: a mirror killed before that leaves the rewind
        for the next leader to notice and handle again (resyncing and restoring are idempotent)."""
        log.warning("mirror: redis epoch %d is not past the recorded %d: redis lost data; resyncing", epoch, self.epoch)
        for queue in sorted(set(self.queues) | set(self.cursors)):
            self.resync(queue, "redis-rewound")
        self._read_epoch = max(self._read_epoch, self.epoch) + 1
        self._advance_epoch(to=self._read_epoch)  # only the leader writes it
        with transaction.atomic():
            self._fence()
        if self.fault:
            self.fault("rewound")
        self._read_pending = True

    def _gap(self, queue: str, info: StreamInfo) -> str | None:
        cursor = self.cursors.get(queue, (0, 0))
        last = parse_id(info.last_id)
        if last < cursor:
            return "redis-rewound"
        if info.entries_added <= info.length:
            return None  # nothing was ever trimmed from this stream
        if cursor == (0, 0):
            return "gap"  # we never applied anything, and some entries are gone
        # An empty stream: everything up to the last id is gone.
        first_id = parse_id(info.first_id) if info.first_id else (last[0], last[1] + 1)
        # Conservative: the entry at the cursor itself may be the only one trimmed (then resync is redundant).
        return "gap" if cursor < first_id and cursor < last else None

    def _wait_for_events(self) -> None:
        """Block until any stream has an entry newer than what we have seen (or block_ms passes)."""
        self.feed.wait({q: self._last_generated.get(q, "$") for q in self.queues}, self.block_ms)

    # --- applying ---------------------------------------------------------------------------------

    def apply(self, events: list[Event]) -> int:
        """Write the current Redis state of every job these events touch, commit, then acknowledge."""
        started = time.monotonic()
        synced = datetime.now(UTC)
        jobs: dict[str, _JobEvents] = {}
        queue_changes: dict[str, Event] = {}
        for e in events:
            if not e.job:
                if e.name in ("paused", "resumed"):
                    queue_changes[e.queue] = e
                continue
            j = jobs.get(e.job)
            if j is None:
                j = jobs[e.job] = _JobEvents(e.queue, e)
            j.last = e
            if "entry" in e.fields:
                j.history = True
            if e.name in CHANGES_FINAL:
                j.changes_final = True
                self._final.pop(e.job, None)
            if e.name == "requeued" and e.fields.get("from") == "dead":
                j.requeued_at = stream_time(e.id)
        for job_id in [i for i, j in jobs.items() if i in self._final and not j.changes_final]:
            # Already written in a final state, and nothing in this batch can change a final job:
            # these are older events of it (the mirror read its hash when it was already finished).
            del jobs[job_id]
        read = self.queries.jobs_by_id(
            [(j.queue, job_id) for job_id, j in jobs.items()], history={i for i, j in jobs.items() if j.history}
        )
        found: dict[str, RedisJob | None] = dict(zip(jobs, read, strict=True))
        # A job already final when we read it is written (and remembered) as final now, so later events
        # that carry its attempts will be skipped: read its history now if no event of this batch did.
        late = [
            i for i, job in found.items() if job is not None and not jobs[i].history and job.state in TERMINAL_STATES
        ]  # fmt: skip
        for job_id, history in zip(late, self.queries.histories([(jobs[i].queue, i) for i in late]), strict=True):
            found[job_id] = replace(cast(RedisJob, found[job_id]), history=history)
        rows: list[tuple[Any, ...]] = []
        attempts: list[tuple[Any, ...]] = []
        dead: list[DeadLetter] = []
        deleted: list[str] = []
        gone: dict[str, list[str]] = {}  # state to record -> ids whose hash is gone (expired or TTL)
        finished: list[tuple[str, datetime]] = []
        for job_id, j in jobs.items():
            job = found[job_id]
            if job is None:
                if j.last.name == "deleted":
                    deleted.append(job_id)
                else:
                    state = j.last.fields.get("state", "")
                    gone.setdefault(state if state in JobState._value2member_map_ else "", []).append(job_id)
                continue
            row = job_values(job, synced)
            rows.append(row)
            job_attempts = attempt_values(job_id, job.history)
            attempts.extend(job_attempts)
            state, finished_at = row[_STATE], row[_FINISHED_AT]
            if state == JobState.DEAD and (letter := dead_letter_row(row, job_attempts[-1] if job_attempts else None)):
                dead.append(letter)
            if finished_at is not None and state in TERMINAL_STATES:
                finished.append((job_id, finished_at))
        by_queue: dict[str, list[Event]] = {}
        for e in events:
            by_queue.setdefault(e.queue, []).append(e)
        with transaction.atomic():
            self._fence()
            self._write(rows, attempts, dead)
            for job_id, j in jobs.items():
                if j.requeued_at is not None:
                    DeadLetter.objects.filter(
                        job_id=job_id, resubmitted_at__isnull=True, died_at__lte=j.requeued_at
                    ).update(resubmitted_at=j.requeued_at)
            for start in range(0, len(deleted), 500):
                Job.objects.filter(id__in=deleted[start : start + 500]).delete()
            for state, ids in gone.items():
                changes: dict[str, Any] = {"in_redis": False, "synced_at": synced}
                if state:
                    changes["state"] = state
                for start in range(0, len(ids), 500):
                    Job.objects.filter(id__in=ids[start : start + 500]).update(**changes)
            for queue, e in queue_changes.items():
                Queue.objects.update_or_create(
                    name=queue, defaults={"paused": e.name == "paused", "changed_at": stream_time(e.id)}
                )
            for queue, queue_events in by_queue.items():
                self._save_cursor(queue, max(parse_id(e.id) for e in queue_events), len(queue_events))
            if self.fault:
                self.fault("before_commit")
        committed_at = time.time()
        for job_id, _ in finished:
            self._final[job_id] = None
        for job_id in deleted:
            self._final.pop(job_id, None)
        while len(self._final) > FINAL_CACHE:
            self._final.popitem(last=False)
        for queue, queue_events in by_queue.items():
            top = max(parse_id(e.id) for e in queue_events)
            self.cursors[queue] = max(self.cursors.get(queue, (0, 0)), top)
        if self.fault:
            self.fault("after_commit")
        self.feed.ack({queue: [e.id for e in queue_events] for queue, queue_events in by_queue.items()})
        self.events_applied += len(events)
        written = len(rows) + len(attempts) + len(dead) + len(deleted)
        self.rows_written += written
        if self.on_batch:
            self.on_batch(
                BatchStats(len(events), len(jobs), written, time.monotonic() - started, committed_at, finished)
            )
        return len(events)

    @staticmethod
    def _write(rows: list[tuple[Any, ...]], attempts: list[tuple[Any, ...]], dead: list[DeadLetter]) -> None:
        if rows:
            _upsert(Job, ["id", *JOB_FIELDS], ["id"], JOB_FIELDS, rows)
        if attempts:
            columns = ["job_id", "number", *ATTEMPT_FIELDS]
            _upsert(Attempt, columns, ["job_id", "number"], ATTEMPT_FIELDS, attempts)
        if dead:
            DeadLetter.objects.bulk_create(dead, ignore_conflicts=True)

    def _save_cursor(self, queue: str, top: StreamId, events: int) -> None:
        current = self.cursors.get(queue, (0, 0))
        last_id = format_id(max(current, top))
        if not MirrorCursor.objects.filter(queue=queue).update(last_id=last_id, events=F("events") + events):
            MirrorCursor.objects.create(queue=queue, last_id=last_id, events=events)

    # --- resynchronisation ------------------------------------------------------------------------

    def resync(self, queue: str, reason: str) -> MirrorResync:
        """Rebuild one queue's rows from Redis: every job in its sets, then rows Redis no longer has.

        Rows for jobs Redis no longer holds are kept as history with in_redis=false, except waiting ones
        after a gap: only an operator's delete removes a waiting job, so those rows are deleted too."""
        if reason != "redis-rewound":  # (a rewind moves the counter once every queue is done: see _rewound)
            # The snapshot is as new as this epoch: the database records it with the rows (see _fence).
            self._read_epoch = max(self._read_epoch, self._advance_epoch())
        self.store.drain(queue)  # jobs accepted but not yet made into hashes are in no set
        upto = self.feed.last_id(queue)
        log.log(
            logging.INFO if reason == "initial" else logging.WARNING,
            "mirror resync queue=%s reason=%s from=%s to=%s",
            queue,
            reason,
            format_id(self.cursors[queue]) if queue in self.cursors else "-",
            upto,
        )
        ids = self.queries.ids(queue)
        paused = self.queries.is_paused(queue)
        present: set[str] = set()
        for start in range(0, len(ids), RESYNC_CHUNK):
            present |= self._resync_chunk(queue, ids[start : start + RESYNC_CHUNK])
        known = set(Job.objects.filter(queue=queue, in_redis=True).values_list("id", "state"))
        missing = [(i, s) for i, s in known if i not in present]
        # What Redis lost goes back before any row is marked: a mirror killed in between leaves the rows as
        # they were, and the next leader (which still sees the rewind, see _rewound) puts them back. Their
        # events follow `upto`, so the group recreated below reads them.
        restored = Restored(frozenset(), 0)
        if reason == "redis-rewound" and self.restore and missing:
            restored = restore_lost_jobs(self.store.redis, list(Job.objects.filter(id__in=[i for i, _ in missing])))
        waiting = {JobState.QUEUED.value, JobState.SCHEDULED.value, JobState.RETRYING.value}
        delete = [i for i, s in missing if reason == "gap" and s in waiting]
        keep = [i for i, s in missing if not (reason == "gap" and s in waiting) and i not in restored.ids]
        now = datetime.now(UTC)
        with transaction.atomic():
            self._fence()
            for start in range(0, len(delete), 500):
                Job.objects.filter(id__in=delete[start : start + 500]).delete()
            for start in range(0, len(keep), 500):
                Job.objects.filter(id__in=keep[start : start + 500]).update(in_redis=False, synced_at=now)
            Queue.objects.update_or_create(name=queue, defaults={"paused": bool(paused)})
            MirrorCursor.objects.update_or_create(queue=queue, defaults={"last_id": upto})
            record = MirrorResync.objects.create(
                queue=queue,
                reason=reason,
                from_id=format_id(self.cursors[queue]) if queue in self.cursors else "",
                to_id=upto,
                jobs=len(present),
                missing=len(missing),
                restored=restored.created,
            )
        # Start the group just after the snapshot's stream position; its old pending entries go with it.
        self._ensure_group(queue, upto, recreate=True)
        if self.fault:
            self.fault("resynced")
        self.cursors[queue] = parse_id(upto)
        self._last_generated[queue] = upto
        self._final.clear()  # Redis may have forgotten jobs this cache says are final
        self.resyncs += 1
        return record

    def _resync_chunk(self, queue: str, ids: Sequence[str]) -> set[str]:
        read = self.queries.jobs_by_id([(queue, i) for i in ids], history=True)
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
            if row[_STATE] == JobState.DEAD and (
                letter := dead_letter_row(row, job_attempts[-1] if job_attempts else None)
            ):
                dead.append(letter)
        alive = [r[0] for r in rows if r[_STATE] != JobState.DEAD]
        with transaction.atomic():
            self._fence()
            self._write(rows, attempts, dead)
            if alive:
                DeadLetter.objects.filter(job_id__in=alive, resubmitted_at__isnull=True).update(resubmitted_at=synced)
        return {r[0] for r in rows}


def _upsert(
    model: type[models.Model], columns: list[str], conflict: list[str], update: list[str], rows: list[tuple[Any, ...]]
) -> None:
    """INSERT ... ON CONFLICT DO UPDATE without the ORM's per-value compilation (the mirror's hot path;
    bulk_create(update_conflicts=True) costs about five times more CPU per row)."""
    qn = connection.ops.quote_name
    head = f"INSERT INTO {qn(model._meta.db_table)} ({', '.join(qn(c) for c in columns)}) "
    tail = (
        f" ON CONFLICT ({', '.join(qn(c) for c in conflict)}) "
        f"DO UPDATE SET {', '.join(f'{qn(c)} = EXCLUDED.{qn(c)}' for c in update)}"
    )
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # One statement, one array per column: the same query text every time (parsed once).
            types = [model._meta.get_field(c).db_type(connection) for c in columns]
            unnest = ", ".join(f"%s::{t}[]" for t in types)
            cursor.execute(
                f"{head}SELECT * FROM unnest({unnest}){tail}", [list(col) for col in zip(*rows, strict=True)]
            )
            return
        # SQLite (and others): sqlite3's C loop over one prepared statement. Datetimes are stored as
        # Django stores them (naive UTC text), so lookups and ordering keep working.
        adapt = connection.ops.adapt_datetimefield_value
        rows = [tuple(adapt(v) if isinstance(v, datetime) else v for v in row) for row in rows]
        cursor.executemany(f"{head}VALUES ({', '.join(['%s'] * len(columns))}){tail}", rows)


def build_mirror(connection_: "redis.Redis | None" = None, **overrides: Any) -> Mirror:
    """The mirror loop configured from settings, with the leader's side duties: the outbox relay,
    database retention and pruning of old published outbox entries."""
    from jobconsole import cleaning, outbox
    from jobconsole.conf import get_config, mirror_config
    from jobconsole.engine import get_redis

    config = mirror_config()
    options: dict[str, Any] = {
        "batch": int(config["BATCH"]),
        "block_ms": int(config["BLOCK_MS"]),
        "lock_ttl": float(config["LOCK_TTL"]),
        "events_maxlen": int(get_config()["EVENTS_MAXLEN"]),
        "restore": bool(config["RESTORE"]),
        "periodic": [
            (float(config["RELAY_EVERY"]), outbox.relay),
            (float(config["RETENTION_EVERY"]), cleaning.enforce_db_retention),
            (float(config["RETENTION_EVERY"]), outbox.prune),
        ],
        **overrides,
    }
    return Mirror(connection_ or get_redis(), **options)
