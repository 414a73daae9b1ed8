"""Periodic jobs: schedules (a cron expression or a fixed interval) and the scheduler that fires them.

Any number of schedulers may run. Each slot (an instant a schedule is due) fires exactly once:

1. A leader lock (lock.lua, name 'scheduler') lets one scheduler at a time do the work. It only saves
   effort: correctness does not rest on it, since a leader may stall past its lock's TTL.
2. Per schedule, Redis keeps the instant up to which every slot is handled. A scheduler moves it from the
   value it read to the slot it fires by compare-and-set (periodic.lua), refused when another scheduler
   moved it first ('stale') or when the slot is still in the future by Redis's clock ('early'). One move per
   slot succeeds, so one scheduler fires it.
3. The move records the slot's job as pending; the winner enqueues the job under an id derived from the
   schedule and slot (`ids.slot_job_id`) and a unique key per slot, then confirms. A scheduler that died in
   between leaves the pending record, and a later pass enqueues the same id again: enqueue.lua takes an id
   it knows as 'exists', so the slot fires once either way.

Slots missed while no scheduler ran (older than `misfire_grace`) follow the schedule's misfire policy:
`skip` fires none of them, `run_once` fires one job for all of them; later slots fire as usual. A new
schedule starts with its first slot after it is first seen; a disabled one lets its slots pass unfired.

Schedules are plain data: the Django layer builds them from the settings and the database and hands them to
the scheduler (a callable read every pass). Engine code: no Django here.
"""

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from enum import StrEnum
from typing import Any

import redis

from jobconsole.core.client import Client
from jobconsole.core.cron import CronExpression, zone_named
from jobconsole.core.errors import InvalidJob
from jobconsole.core.ids import slot_job_id
from jobconsole.core.keys import NAME_PATTERN
from jobconsole.core.results import EnqueueResult, SlotRecord

log = logging.getLogger(__name__)

RETRYABLE_ERRORS = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError)
MIN_EVERY_SECONDS = 1.0
FIRED_KEPT = 1000


class Misfire(StrEnum):
    """What happens to slots missed while no scheduler ran."""

    SKIP = "skip"  # fire none of them
    RUN_ONCE = "run_once"  # fire one job for all of them


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """One periodic job: `cron` (5 fields or a macro, in `timezone`) or `every` seconds (slots at multiples
    of the interval since the Unix epoch, so every scheduler computes the same ones)."""

    name: str
    task: str
    params: dict[str, Any] = field(default_factory=dict)
    cron: str = ""
    every: float | None = None
    queue: str | None = None  # None: the task's own
    priority: int | str | None = None  # None: the task's own
    enabled: bool = True
    misfire: Misfire = Misfire.SKIP
    timezone: str = "UTC"
    origin: str = ""  # where it was defined ("settings", "database"), for the console
    _cron: CronExpression | None = field(init=False, repr=False, compare=False, default=None)
    _zone: tzinfo = field(init=False, repr=False, compare=False, default=UTC)

    def __post_init__(self) -> None:
        if not NAME_PATTERN.match(self.name):
            raise ValueError(f"schedule name {self.name!r}: 1-100 letters, digits, '_', '.', '-'")
        if not self.task:
            raise ValueError(f"schedule {self.name}: a task is required")
        if bool(self.cron) == (self.every is not None):
            raise ValueError(f"schedule {self.name}: give either cron or every, not both or neither")
        if self.every is not None and self.every < MIN_EVERY_SECONDS:
            raise ValueError(f"schedule {self.name}: every must be at least {MIN_EVERY_SECONDS:g} s")
        if not isinstance(self.params, dict):
            raise ValueError(f"schedule {self.name}: params must be a dict")
        object.__setattr__(self, "misfire", Misfire(self.misfire))
        object.__setattr__(self, "_zone", zone_named(self.timezone))  # raises for an unknown zone
        object.__setattr__(self, "_cron", CronExpression.parse(self.cron) if self.cron else None)

    @property
    def expression(self) -> str:
        """The schedule as an operator reads it: the cron text, or "every 30 s"."""
        return self.cron or f"every {self.every:g} s"

    def next_after(self, after_ms: int) -> int | None:
        """The first slot strictly after `after_ms` (ms since the epoch); None if there is none."""
        cron = self._cron
        if cron is None:
            every_ms = round((self.every or 0) * 1000)
            return (after_ms // every_ms + 1) * every_ms
        found = cron.next_after(datetime.fromtimestamp(after_ms / 1000, UTC), self._zone)
        return None if found is None else int(found.timestamp() * 1000)

    def next_runs(self, after_ms: int, count: int) -> list[int]:
        """The next `count` slots after `after_ms`."""
        runs: list[int] = []
        slot = self.next_after(after_ms)
        while slot is not None and len(runs) < count:
            runs.append(slot)
            slot = self.next_after(slot)
        return runs


@dataclass(frozen=True, slots=True)
class Fired:
    """A slot this scheduler fired."""

    schedule: str
    slot_ms: int
    job_id: str
    status: str  # the enqueue's: 'created', or 'exists' when a repair found the job already in
    late: bool = False  # the one job `run_once` fires for missed slots


def slot_unique_key(schedule: str, slot_ms: int) -> str:
    return f"periodic:{schedule}:{slot_ms}"


def enqueue_now(client: Client, schedule: Schedule) -> EnqueueResult:
    """Run a schedule's job now, outside its slots ("run now"): a fresh id, no slot is used up."""
    return client.enqueue(schedule.task, schedule.params, queue=schedule.queue, priority=schedule.priority)


def read_records(client: Client, names: Sequence[str]) -> dict[str, SlotRecord]:
    """Each schedule's bookkeeping: what it fired last, up to when its slots are handled."""
    return client.store.periodic_records(names)


def forget(client: Client, name: str) -> None:
    """Drop a deleted schedule's bookkeeping (a schedule made again under the name starts afresh)."""
    client.store.periodic_forget(name)


type ScheduleSource = Callable[[], Sequence[Schedule]]


class Scheduler:
    """Fires due slots of the schedules `source` returns (read every pass)."""

    def __init__(
        self,
        client: Client,
        source: ScheduleSource | Sequence[Schedule],
        *,
        interval: float = 1.0,
        misfire_grace: float = 60.0,
        repair_after: float = 10.0,
        lock_ttl: float | None = None,
        use_lock: bool = True,
        max_fires_per_pass: int = 100,
    ) -> None:
        self.client = client
        self.store = client.store
        self.source: ScheduleSource = source if callable(source) else (lambda: list(source))
        self.interval = interval
        self.misfire_grace_ms = int(misfire_grace * 1000)
        self.repair_after_ms = int(repair_after * 1000)
        self.lock_ttl_ms = int((lock_ttl if lock_ttl is not None else max(3 * interval, 3.0)) * 1000)
        self.use_lock = use_lock  # off only in tests that race schedulers without it
        self.max_fires_per_pass = max_fires_per_pass
        self.token = uuid.uuid4().hex
        self.fired: deque[Fired] = deque(maxlen=FIRED_KEPT)  # what this instance fired lately (tests, logs)

    def is_leader(self) -> bool:
        return not self.use_lock or self.store.acquire_lock("scheduler", self.token, self.lock_ttl_ms)

    def release(self) -> None:
        if self.use_lock:
            try:
                self.store.release_lock("scheduler", self.token)
            except RETRYABLE_ERRORS:
                pass

    def step(self) -> list[Fired]:
        """One pass over every schedule if we lead; returns the slots fired."""
        if not self.is_leader():
            return []
        schedules = list(self.source())
        records = self.store.periodic_records([s.name for s in schedules])
        now_ms = self.store.time_ms()
        fired: list[Fired] = []
        for schedule in schedules:
            try:
                fired += self._step_schedule(schedule, records[schedule.name], now_ms)
            except RETRYABLE_ERRORS:
                raise
            except Exception:
                log.exception("scheduler: schedule %s failed this pass", schedule.name)
        self.fired.extend(fired)
        return fired

    def _step_schedule(self, schedule: Schedule, record: SlotRecord, now_ms: int) -> list[Fired]:
        name = schedule.name
        if record.pending_job:
            # A slot was claimed and its enqueue not confirmed: a scheduler is enqueuing it right now, or died
            # before it could. Wait for the first; after `repair_after`, enqueue it again under the same id.
            if now_ms - record.pending_since_ms < self.repair_after_ms:
                return []
            log.warning(
                "scheduler: %s slot %s was claimed but not confirmed; enqueuing it", name, record.pending_slot_ms
            )
            repaired = self._enqueue(schedule, record.pending_job, record.pending_slot_ms)
            return [] if repaired is None else [repaired]
        handled = record.handled_ms
        if handled is None:  # new: its first slot is the first after now, nothing in the past fires
            self.store.periodic_advance(name, expected_ms=None, new_ms=now_ms, job_id="", slot_ms=0)
            return []
        first = schedule.next_after(handled)
        if first is None or first > now_ms:
            return []
        if not schedule.enabled:  # its slots pass unfired, so enabling it fires no backlog
            self.store.periodic_advance(name, expected_ms=handled, new_ms=now_ms, job_id="", slot_ms=0)
            return []
        fired: list[Fired] = []
        on_time_from = now_ms - self.misfire_grace_ms
        if first < on_time_from:
            # Slots up to `on_time_from` were missed. `run_once` fires one job for them all, under the first
            # missed slot's id; `skip` only marks them handled.
            missed_up_to = on_time_from - 1
            job_id = slot_job_id(name, first) if schedule.misfire is Misfire.RUN_ONCE else ""
            outcome = self.store.periodic_advance(
                name, expected_ms=handled, new_ms=missed_up_to, job_id=job_id, slot_ms=first
            )
            if outcome != "ok":
                return []
            log.warning("scheduler: %s missed slots from %s (misfire=%s)", name, first, schedule.misfire.value)
            if job_id:
                done = self._enqueue(schedule, job_id, first, late=True)
                if done is None:
                    return []
                fired.append(done)
            handled = missed_up_to
        while len(fired) < self.max_fires_per_pass:
            slot = schedule.next_after(handled)
            if slot is None or slot > now_ms:
                break
            job_id = slot_job_id(name, slot)
            outcome = self.store.periodic_advance(name, expected_ms=handled, new_ms=slot, job_id=job_id, slot_ms=slot)
            if outcome != "ok":  # 'stale': another scheduler fired it; 'early': cannot be, our now is Redis's
                break
            done = self._enqueue(schedule, job_id, slot)
            if done is None:
                break
            fired.append(done)
            handled = slot
        return fired

    def _enqueue(self, schedule: Schedule, job_id: str, slot_ms: int, *, late: bool = False) -> Fired | None:
        """Enqueue a claimed slot's job and confirm it. A job the client refuses for good (unknown task, bad
        params) is confirmed anyway, with an error logged, so the schedule goes on; a Redis error leaves it
        pending for a later pass to repair."""
        try:
            result = self.client.enqueue(
                schedule.task,
                schedule.params,
                id=job_id,
                queue=schedule.queue,
                priority=schedule.priority,
                unique_key=slot_unique_key(schedule.name, slot_ms),
            )
        except InvalidJob as exc:
            log.error("scheduler: %s slot %s not enqueued: %s", schedule.name, slot_ms, exc)
            self.store.periodic_confirm(schedule.name, job_id)
            return None
        self.store.periodic_confirm(schedule.name, job_id)
        log.info("scheduler: fired %s slot=%s job=%s status=%s", schedule.name, slot_ms, job_id, result.status)
        return Fired(schedule.name, slot_ms, job_id, result.status, late)

    def run(self, stop: threading.Event) -> None:
        """Loop until `stop` is set. With an interval of 1 s (the default) a pass starts just after each second
        by this host's clock (slots are whole seconds or minutes), so a slot fires within a few milliseconds of
        its time; whether it is due is Redis's clock's to say. Redis outages are logged and waited out."""
        try:
            while not stop.is_set():
                try:
                    self.step()
                except RETRYABLE_ERRORS as exc:
                    log.warning("scheduler: redis unavailable (%s); retrying", exc)
                except Exception:
                    log.exception("scheduler pass failed")
                stop.wait(self._pause())
        finally:
            self.release()

    def _pause(self) -> float:
        if self.interval < 1.0:
            return self.interval
        to_next_second = 1.0 - (time.time() % 1.0) + 0.005
        return min(self.interval, to_next_second) if self.interval <= 1.0 else self.interval
