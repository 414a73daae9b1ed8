"""Periodic jobs as deployed: the schedules from the settings and the database fed to the engine's scheduler,
what the console and the API show of them, and their operator actions (enable, disable, run now; audited).

The engine (`core/periodic.py`) fires the slots; this module only builds its plain-data schedules. A database
row named like a settings schedule is ignored (settings win; the admin refuses such a name).
"""

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import DatabaseError, InterfaceError, close_old_connections

from jobconsole import audit
from jobconsole.conf import periodic_config, schedule_from_settings
from jobconsole.core import EnqueueResult
from jobconsole.core.periodic import Schedule, Scheduler, enqueue_now, read_records
from jobconsole.db_connections import recover
from jobconsole.engine import get_client
from jobconsole.models import AuditLog, PeriodicSchedule

log = logging.getLogger(__name__)

NEXT_RUNS = 5


class ScheduleNotFound(LookupError):
    pass


class ReadOnlySchedule(ValueError):
    """A settings schedule: changed by a deployment, not by an operator."""


def settings_schedules() -> list[Schedule]:
    return [schedule_from_settings(name, spec) for name, spec in periodic_config()["SCHEDULES"].items()]


def all_schedules() -> list[Schedule]:
    """Every schedule, settings first, then the database rows by name; an invalid row is logged and left out."""
    return settings_schedules() + _database_schedules(set(periodic_config()["SCHEDULES"]))


def _database_schedules(taken: set[str]) -> list[Schedule]:
    schedules: list[Schedule] = []
    for row in PeriodicSchedule.objects.all():
        if row.name in taken:
            log.warning("periodic: database schedule %s ignored: the settings define one of that name", row.name)
            continue
        try:
            schedules.append(row.to_schedule())
        except ValueError as exc:
            log.error("periodic: database schedule %s is invalid and ignored: %s", row.name, exc)
    return schedules


class _SchedulerSource:
    """What the scheduler reads every pass. A worker runs without its database (runworker needs only Redis):
    then the settings' schedules still fire, the database's wait for it (their missed slots then follow
    their misfire policy), and the problem is logged once a minute, not every pass."""

    def __init__(self) -> None:
        self._warned_at = 0.0

    def __call__(self) -> list[Schedule]:
        schedules = settings_schedules()
        close_old_connections()  # on the scheduler's thread: a connection the database closed is replaced
        taken = {s.name for s in schedules}
        try:
            try:
                return schedules + _database_schedules(taken)
            except (DatabaseError, InterfaceError) as exc:
                if not recover("periodic scheduler", exc):
                    raise
                return schedules + _database_schedules(taken)  # at once, on a new connection: no slot missed
        except (DatabaseError, InterfaceError) as exc:
            if time.monotonic() - self._warned_at > 60:
                self._warned_at = time.monotonic()
                log.warning("periodic: database schedules unavailable (%s); firing the settings' only", exc)
            return schedules


def build_scheduler() -> Scheduler:
    """The scheduler `runworker` (in a thread) and `runscheduler` run."""
    config = periodic_config()
    return Scheduler(
        get_client(),
        _SchedulerSource(),
        interval=config["INTERVAL"],
        misfire_grace=config["MISFIRE_GRACE"],
    )


@dataclass(frozen=True)
class ScheduleInfo:
    """One schedule as the console and the API show it."""

    schedule: Schedule
    last_fired_at: datetime | None
    last_job_id: str
    next_runs: list[datetime]

    @property
    def name(self) -> str:
        return self.schedule.name

    @property
    def editable(self) -> bool:
        return self.schedule.origin == "database"

    def as_json(self) -> dict[str, object]:
        s = self.schedule
        return {
            "name": s.name,
            "origin": s.origin,
            "task": s.task,
            "params": s.params,
            "cron": s.cron or None,
            "every_seconds": s.every,
            "queue": s.queue,
            "priority": s.priority,
            "enabled": s.enabled,
            "misfire": s.misfire.value,
            "timezone": s.timezone,
            "last_fired_at": self.last_fired_at.isoformat() if self.last_fired_at else None,
            "last_job_id": self.last_job_id or None,
            "next_runs": [moment.isoformat() for moment in self.next_runs] if s.enabled else [],
        }


def _moment(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def describe(schedules: Sequence[Schedule]) -> list[ScheduleInfo]:
    """What Redis knows of each schedule (last fired) and its next runs, counted from Redis's clock."""
    client = get_client()
    records = read_records(client, [s.name for s in schedules])
    now_ms = client.store.time_ms()
    infos: list[ScheduleInfo] = []
    for schedule in schedules:
        record = records[schedule.name]
        after = max(now_ms, record.handled_ms or 0)
        infos.append(
            ScheduleInfo(
                schedule=schedule,
                last_fired_at=_moment(record.last_fired_ms) if record.last_fired_ms else None,
                last_job_id=record.last_job,
                next_runs=[_moment(ms) for ms in schedule.next_runs(after, NEXT_RUNS)],
            )
        )
    return infos


def find(name: str) -> Schedule:
    for schedule in all_schedules():
        if schedule.name == name:
            return schedule
    raise ScheduleNotFound(name)


def set_enabled(name: str, enabled: bool, user: object, *, reason: str = "") -> AuditLog:
    """Enable or disable a database schedule, audited. ReadOnlySchedule for a settings one."""
    schedule = find(name)
    if schedule.origin != "database":
        raise ReadOnlySchedule(f"schedule {name} is defined in the settings; change it there")
    PeriodicSchedule.objects.filter(name=name).update(enabled=enabled)
    action = "schedule_enable" if enabled else "schedule_disable"
    return audit.record(user, action, count=1, reason=reason, detail={"schedule": name})  # type: ignore[arg-type]


def run_now(name: str, user: object, *, reason: str = "") -> EnqueueResult:
    """Enqueue a schedule's job now (a fresh id; its slots are untouched), audited."""
    schedule = find(name)
    result = enqueue_now(get_client(), schedule)
    audit.record(
        user,  # type: ignore[arg-type]
        "schedule_run_now",
        job_ids=[result.id],
        queue=result.queue,
        reason=reason,
        detail={"schedule": name},
    )
    return result
