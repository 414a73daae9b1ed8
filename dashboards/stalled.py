"""Running jobs with the evidence of whether they are stalled.

A running job is stalled when
- its lease ran out: its worker stopped renewing it (dead, frozen, cut off from Redis, or it gave up on a
  stalled task); the recoverer requeues such a job at its next pass, if one is running; or
- its last heartbeat is older than its task's `max_heartbeat_interval`: the task stopped reporting, so its
  worker stops renewing the lease, which then runs out by its deadline.
The evidence shown with it: the last heartbeat, the lease deadline, and whether its worker is still
registered (a worker whose registry entry expired died without saying so). A job whose worker is gone but
whose lease still runs is not yet stalled by these rules; it is marked as orphaned, since its lease will run
out. Every time is Redis's clock, in which leases are counted.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jobconsole.core.job import Job
from jobconsole.core.queries.jobs import TimedJob
from jobconsole.core.queries.workers import WorkerInfo


@dataclass(frozen=True, slots=True)
class RunningJob:
    job: Job
    lease_deadline: datetime
    now: datetime
    worker: WorkerInfo | None  # its registry entry; None when the registry has no such worker
    max_heartbeat_interval: float | None  # seconds, from the task's announced options

    @property
    def runtime(self) -> timedelta | None:
        return self.now - self.job.started_at if self.job.started_at else None

    @property
    def last_heartbeat(self) -> datetime | None:
        return self.job.heartbeat_at or self.job.started_at

    @property
    def heartbeat_age(self) -> timedelta | None:
        return self.now - self.last_heartbeat if self.last_heartbeat else None

    @property
    def lease_left(self) -> timedelta:
        return self.lease_deadline - self.now

    @property
    def lease_ran_out(self) -> bool:
        return self.lease_deadline <= self.now

    @property
    def heartbeat_overdue(self) -> bool:
        age = self.heartbeat_age
        return bool(self.max_heartbeat_interval and age and age.total_seconds() > self.max_heartbeat_interval)

    @property
    def stalled(self) -> bool:
        return self.lease_ran_out or self.heartbeat_overdue

    @property
    def worker_registered(self) -> bool:
        return self.worker is not None and self.worker.state != "gone"

    @property
    def orphaned(self) -> bool:
        return not self.worker_registered and not self.stalled

    @property
    def host(self) -> str:
        return self.job.raw.get("host", "")

    @property
    def pid(self) -> str:
        return self.job.raw.get("pid", "")

    @property
    def progress_percent(self) -> int | None:
        p = self.job.progress
        return None if p is None else max(0, min(100, round(p * 100)))

    @property
    def reasons(self) -> list[str]:
        """Why it counts as stalled (or orphaned), in words."""
        out = []
        if self.lease_ran_out:
            out.append(f"lease ran out {_seconds(-self.lease_left)} ago")
        if self.heartbeat_overdue:
            out.append(
                f"no heartbeat for {_seconds(self.heartbeat_age)}; the task must report every "
                f"{self.max_heartbeat_interval:g} s"
            )
        if not self.worker_registered:
            out.append("its worker is no longer registered")
        return out


def _seconds(delta: timedelta | None) -> str:
    if delta is None:
        return "?"
    s = delta.total_seconds()
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"


def running_jobs(
    page: list[TimedJob], now: datetime, workers: list[WorkerInfo], options: dict[str, dict[str, Any]]
) -> list[RunningJob]:
    by_id = {w.id: w for w in workers}
    out = []
    for timed in page:
        interval = options.get(timed.job.task, {}).get("max_heartbeat_interval")
        out.append(
            RunningJob(
                job=timed.job, lease_deadline=timed.at, now=now, worker=by_id.get(timed.job.worker),
                max_heartbeat_interval=float(interval) if isinstance(interval, (int, float)) else None,
            )
        )  # fmt: skip
    return out
