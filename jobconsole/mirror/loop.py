"""The mirror loop: applies every queue's events stream to the database, in batches, idempotently.

How it stays exact:

* Every state change in Redis appends an event to the queue's stream in the same Lua script. The
  mirror reads the streams through one consumer group (``jc-mirror``), applies a batch in one database
  transaction, and XACKs only after the commit. A mirror killed at any point leaves its batch pending;
  the next leader re-reads the pending entries first (consumer name is fixed) and applies them again.
* Applying is idempotent because the mirror does not replay event contents: for each job in a batch it
  reads the job's current hash (and attempt history) from Redis in one pipeline and upserts it. Applying
  an old event again just rewrites the same (or a newer) state.
* The last applied stream id of each queue is committed in the same transaction as the rows (`MirrorCursor`).
  Each read describes every stream in the same atomic step (mirror_read.lua, a script so that it runs while
  Redis is full): if a stream's first entry is past the cursor, entries were trimmed before being applied (the
  mirror was down too long). It then resynchronises that queue from the Redis sets and job hashes and records
  a `MirrorResync`. (The check is conservative: it may resync when only the cursor's own entry was trimmed; it
  never misses a gap.)
* Redis losing writes (an AOF restored from a copy, a power loss under `appendfsync everysec`, a new empty
  server) is noticed by an epoch: every read increments a counter in Redis in the same script, and every
  batch records the value it read in the database. A value not above the recorded one means Redis forgot
  what the database had seen: every queue resyncs ("redis-rewound"), and the jobs the database knew as
  waiting or running that Redis lost are enqueued again under their ids (mirror/restore.py).
* One leader at a time: an owner-token Redis lock, plus a database fence row (`MirrorLease`) that each
  batch updates only while it still holds the token. A deposed leader's late batch therefore rolls
  back instead of overwriting rows a newer leader wrote.

The parts, each with its own state: leader.py (the lock, the fence and the recorded epoch), reader.py
(reading a batch and the gap and epoch checks), writer.py (applying a batch), resync.py (resync and
rewind), cursors.py (each queue's position). `Mirror` composes them; service.py runs it with the leader's
chores.
"""

import logging
import threading
import time

import redis
from django.db import DatabaseError, InterfaceError, close_old_connections, connection

from jobconsole.core.feed import EventFeed
from jobconsole.core.maintenance import RETRYABLE_ERRORS
from jobconsole.core.queries import Queries
from jobconsole.core.store import DEFAULT_EVENTS_MAXLEN, Store
from jobconsole.db_connections import CONNECTION_ERRORS, close_broken, connection_lost, is_lost_connection
from jobconsole.mirror.cursors import Cursors
from jobconsole.mirror.leader import Leadership, LostLeadership
from jobconsole.mirror.reader import Reader
from jobconsole.mirror.resync import Resync
from jobconsole.mirror.writer import Writer

log = logging.getLogger(__name__)

STEP_S = 1.0  # at most this long in one step's run of full batches (the leader's chores run between steps)
# While idle, a wait that saw nothing new is followed by another wait, not by a read and a drain of every queue,
# for up to this long; then the mirror looks anyway. The waits wake on any queue's new event or intake entry, but
# an intake entry written between a look and the next wait's start is seen by no wait: this bounds its delay.
QUIET_LOOK_EVERY_S = 1.0
RECONNECT_WAIT_S = 0.2  # after a dropped database connection, before the step is tried again on a new one


class Mirror:
    def __init__(
        self,
        connection_: "redis.Redis",
        *,
        batch: int = 1000,
        block_ms: int = 100,
        settle_ms: int = 0,
        pace_ms: int = 0,
        overlap: bool = False,
        lock_ttl: float = 10.0,
        name: str | None = None,
        events_maxlen: int = DEFAULT_EVENTS_MAXLEN,
        restore: bool = True,
        writer: type[Writer] = Writer,
        resync: type[Resync] = Resync,
    ) -> None:
        # events_maxlen: for the 'enqueued' events of the intake jobs the mirror drains.
        store = Store(connection_, events_maxlen=events_maxlen)
        feed = EventFeed(store)
        queries = Queries(store)
        self.cursors = Cursors()
        self.leadership = Leadership(store, lock_ttl=lock_ttl, name=name)
        self.reader = Reader(feed, queries, self.leadership, self.cursors, batch=batch, block_ms=block_ms)
        self.writer = writer(queries, feed, self.leadership, self.cursors)
        self.resync = resync(store, feed, queries, self.leadership, self.cursors, self.writer, restore=restore)
        self.settle_s = settle_ms / 1000
        self.pace_s = pace_ms / 1000
        # Build each batch of a backlog while the one before commits (writer.apply); off, every batch commits
        # before the next is read.
        self.overlap = overlap
        self._full = False  # the last batch read was a full one
        self._quiet = False  # the last wait saw nothing new since the last look
        self._looked = 0.0  # time.monotonic() of the last look (a read and a drain of every queue) that found nothing
        self._term = 0  # the leadership term the parts were set up for
        self._reconnects = 0  # dropped connections in a row (the wait before the next try doubles)

    @property
    def leader(self) -> bool:
        return self.leadership.leader

    def release(self) -> None:
        self.leadership.release()

    def run(self, stop: threading.Event) -> None:
        """Mirror until `stop` is set. Redis or database outages are logged and waited out."""
        try:
            while not stop.is_set():
                self.turn(stop)
        finally:
            self.close()

    def turn(self, stop: threading.Event) -> bool:
        """One step of run(), an outage logged and waited out; False if the step failed."""
        try:
            if not self.step() and not self.leader:
                stop.wait(min(1.0, self.leadership.lock_ttl_ms / 3000))
            self._reconnects = 0
            return True
        except LostLeadership as exc:
            log.warning("%s", exc)
            self.leadership.leader = False
        except RETRYABLE_ERRORS as exc:
            log.warning("mirror: redis unavailable (%s); retrying", exc)
            self.reader.pending = True
            stop.wait(1.0)
        except (DatabaseError, InterfaceError) as exc:
            # The batch rolled back and its entries stay pending (unacknowledged, the cursor not moved): the
            # next step reads them again, on a new connection if this one was dropped (each thread has its own).
            self.reader.pending = True
            broken = close_broken() | self.writer.close_broken()  # both threads' (overlap commits in its own)
            if isinstance(exc, CONNECTION_ERRORS) and (broken or is_lost_connection(exc)):
                connection_lost("mirror", exc)
                stop.wait(min(RECONNECT_WAIT_S * 2**self._reconnects, 5.0))  # a database still down: less often
                self._reconnects += 1
                return False
            log.warning("mirror: database error (%s); retrying", exc)
            close_old_connections()
            stop.wait(1.0)
        except Exception:
            log.exception("mirror pass failed")
            self.reader.pending = True
            stop.wait(1.0)
        return False

    def close(self) -> None:
        try:
            self.writer.close()
        finally:
            self.release()
            connection.close()

    def step(self, *, discover_now: bool = False) -> int:
        """Apply one batch if we lead; returns the number of events applied (0: idle or not leader)."""
        if not self._lead():
            return 0
        discovered = self.reader.discover(now=discover_now)
        for queue in discovered:
            self.resync.start(queue)
            self.reader.queues.append(queue)
        if not self.reader.queues:
            time.sleep(self.reader.block_ms / 1000)
            return 0
        if self._stays_quiet(looking=discover_now or bool(discovered)):
            return 0
        self._quiet = False
        try:
            if self.reader.pending:
                n = self._pass(pending=True)
                if n:
                    return n
                self.reader.pending = False
            n = self._pass(pending=False)
            # A backlog: keep reading while the batches come full, each built while the one before commits.
            started = time.monotonic()
            while self.overlap and n and self._full and time.monotonic() - started < STEP_S:
                more = self._pass(pending=False)
                if not more:
                    break
                n += more
        finally:
            self.writer.flush()
        # Nothing new: jobs may still wait in an intake without an event (no worker claims from the queue,
        # or maintenance has not passed yet); drain them, so the next read sees them, before waiting.
        if not n and self.reader.drain_intakes():
            try:
                n = self._pass(pending=False)
            finally:
                self.writer.flush()
        if n and not self._full and self.pace_s:
            # Caught up, with events still coming: read the next ones a little later, in one batch with what
            # follows, rather than paying a batch's fixed cost (a transaction, its fence and cursors, the
            # acknowledgement) for a handful of events.
            time.sleep(self.pace_s)
        elif not n:
            self._looked = time.monotonic()
            self._wait()
        return n

    def _stays_quiet(self, *, looking: bool) -> bool:
        """After a wait that saw nothing new, wait again instead of looking (True), unless something asks for a
        look: a new event or intake entry (this wait ends at once), a pending read, new queues (`looking`), or
        QUIET_LOOK_EVERY_S since the last look. Idle, the mirror then costs Redis one blocking read per wait."""
        if not self._quiet or looking or self.reader.pending:
            return False
        if time.monotonic() - self._looked >= QUIET_LOOK_EVERY_S:
            return False
        return not self._wait()

    def _wait(self) -> bool:
        """Wait for a new event or intake entry; whether one came (a look follows) or the wait timed out."""
        woken = self.reader.wait()
        self._quiet = not woken
        if woken and self.settle_s:
            # Woken by new events while idle: most likely one job just enqueued and handed to an idle worker.
            # Reading it at once would take CPU and Redis time from that worker's start; a few ms later
            # the mirror reads it together with what follows (the lag bound is seconds, pick-up is ms).
            time.sleep(self.settle_s)
        return woken

    def drain(self, max_steps: int = 10_000) -> int:
        """Apply everything currently in the streams (tests and the benchmark); returns events applied."""
        total = 0
        for step in range(max_steps):
            # Look for new queues at once: a queue created since the last look is part of "everything".
            n = self.step(discover_now=step == 0)
            total += n
            if not n and (not self.leader or not self.reader.queues or not self.reader.pending):
                return total
        return total

    def _lead(self) -> bool:
        """Take or keep the lead; a new term starts from what the database committed."""
        if not self.leadership.lead():
            return False
        if self._term != self.leadership.term:
            self.cursors.load()
            self.reader.reset()
            self.writer.forget()
            self._term = self.leadership.term
        return True

    def _pass(self, *, pending: bool) -> int:
        """Read one batch, resync what its checks call for, apply the rest; returns entries handled."""
        batch = self.reader.read(pending=pending)
        # Full: a stream gave as many entries as asked for (not: as many events, which a batch entry of up to 50
        # jobs gives from a few entries; a mirror that has caught up then reads again at once, not after PACE_MS).
        self._full = batch.full
        if batch.rewound or batch.resync or batch.lost:
            self.writer.flush()  # what is in flight commits before a resync reads and writes the database
        if batch.rewound:
            self.resync.rewound(self.reader.queues)
            self.reader.pending = True
            return 0
        for queue, reason in batch.resync:
            self.resync.queue(queue, reason)
        if batch.lost:
            self.reader.pending = True
            return 0
        if not batch.events:
            return batch.trimmed
        return self.writer.apply(batch.events, overlap=self.overlap)
