"""One job as the detail page shows it: read live from Redis while Redis holds it, else from the database
mirror (kept after Redis's retention dropped the job), and its timeline.

The timeline is put together from what lasts, since the queue's event stream is capped (EVENTS_MAXLEN entries
shared by every job of the queue) and so forgets a job's early events: the job's own times (enqueued, due,
finished), every attempt of its history (started on which worker, how it ended), and the audit log (what
operators did, who and why). Events the stream still has for the job and that nothing else records (requeued,
edited, promoted, cancel requested) are added while the job is in Redis: the newest STREAM_SCAN entries of its
queue are read for them.
"""

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from jobconsole.core import JobNotFound, JobState
from jobconsole.core.job import Job as LiveJob
from jobconsole.core.job import ms_to_datetime
from jobconsole.core.states import STATES
from jobconsole.engine import get_client
from jobconsole.models import AuditLog
from jobconsole.models import Job as JobRow

STREAM_SCAN = 500  # newest events of the job's queue read for the timeline
AUDIT_ROWS = 100
# Events the job's times and attempt history do not already tell.
STREAM_ONLY = {"requeued", "edited", "promoted", "cancel_requested", "expired"}


@dataclass(frozen=True, slots=True)
class Moment:
    at: datetime
    what: str
    detail: str = ""
    source: str = "job"  # job, attempt, stream, audit
    tone: str = ""  # ok, warn, bad: the dot's colour; the text says the same
    rank: int = 0  # the order of moments in the same millisecond: as a job's life goes


# Ranks: one script can enqueue and start a job, or promote and start it, in the same millisecond.
ENQUEUED, STREAM, STARTED, ENDED, FINISHED, AUDIT, DUE = range(7)


@dataclass(slots=True)
class JobDetail:
    id: str
    task: str
    queue: str
    state: str
    priority: int
    attempts: int
    max_retries: int
    version: int
    unique_key: str
    group: str
    enqueued_at: datetime | None
    run_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None
    worker: str
    host: str
    pid: str
    progress: float | None
    cancel_requested: bool
    reason: str
    params: str  # the stored JSON text, shown as it is (escaped by the template)
    result: str
    checkpoint: str
    last_error: str
    history: list[Any]  # core.job.Attempt (live) or models.Attempt (mirror): the same field names
    live: bool  # read from Redis now; False: from the mirror, Redis has dropped it
    synced_at: datetime | None = None
    lease_ms: int | None = None
    timeout_ms: int | None = None
    lease_deadline: datetime | None = None
    payload_error: str = ""
    now: datetime = field(default_factory=timezone.now)
    options: dict[str, Any] = field(default_factory=dict)  # the task's registered options, when announced
    timeline: list[Moment] = field(default_factory=list)

    @property
    def job_state(self) -> JobState:
        return JobState(self.state)

    @property
    def heartbeat_age(self) -> timedelta | None:
        beat = self.heartbeat_at or self.started_at
        return self.now - beat if beat and self.state == JobState.RUNNING else None

    @property
    def lease_left(self) -> timedelta | None:
        return self.lease_deadline - self.now if self.lease_deadline else None

    @property
    def running_attempt(self) -> bool:
        """Whether the attempt now running is still open (the history holds finished attempts only)."""
        return self.state == JobState.RUNNING and self.started_at is not None

    @property
    def running_for(self) -> timedelta | None:
        return self.now - self.started_at if self.running_attempt and self.started_at else None

    @property
    def lease_ran_out(self) -> bool:
        return self.lease_deadline is not None and self.lease_deadline <= self.now

    @property
    def lease_overdue(self) -> timedelta | None:
        """How long ago the lease ran out."""
        return self.now - self.lease_deadline if self.lease_deadline and self.lease_ran_out else None

    @property
    def heartbeat_overdue(self) -> bool:
        age, limit = self.heartbeat_age, self.max_heartbeat_interval
        return bool(age and limit and age.total_seconds() > limit)

    @property
    def visibility_timeout(self) -> float | None:
        return self.lease_ms / 1000 if self.lease_ms else None

    @property
    def timeout(self) -> float | None:
        return self.timeout_ms / 1000 if self.timeout_ms else None

    @property
    def progress_percent(self) -> int | None:
        return None if self.progress is None else max(0, min(100, round(self.progress * 100)))

    @property
    def error(self) -> dict[str, Any] | None:
        """The last error as the page lists it: its class, message and outcome, its time as a moment (stored as
        epoch milliseconds), and any other fields as they are; None when there is none or it is not a JSON object."""
        try:
            fields = json.loads(self.last_error) if self.last_error else None
        except ValueError:
            return None
        if not isinstance(fields, dict):
            return None
        at = fields.pop("at", None)
        known = {name: fields.pop(name, "") for name in ("error_class", "message", "outcome")}
        return {**known, "at": ms_to_datetime(at if isinstance(at, int) else None), "other": fields}

    @property
    def completed(self) -> bool:
        return self.state == JobState.COMPLETED

    @property
    def numbered_history(self) -> list[tuple[int, Any]]:
        """The history with each attempt's number in the job's whole life (its place in the history). An entry's
        own `attempt` is the engine's count toward max_retries: a resubmit with attempts reset restarts it and an
        uncounted interruption repeats it, so it reads 1, 2, 1 over a life; the page shows it beside the number."""
        return list(enumerate(self.history, start=1))

    @property
    def running_number(self) -> int:
        """The running attempt's number in the job's life (the history holds the finished ones)."""
        return len(self.history) + 1

    @property
    def lifetime_attempts(self) -> int:
        return len(self.history) + (1 if self.running_attempt else 0)

    @property
    def last_error_heading(self) -> str:
        """ "Last error" with its context: which attempt it came from and, when the job has moved on since (it
        completed, runs again, waits to run again), that it is not the job's present state."""
        error = self.error
        at = error["at"] if error else None
        number = next((n for n, a in reversed(self.numbered_history) if at and a.ended_at == at), None)
        if number is None:
            number = next((n for n, a in reversed(self.numbered_history) if a.error_class), None)
        context = [f"attempt {number}"] if number else []
        if self.state == JobState.COMPLETED:
            context.append("before it completed")
        elif self.running_attempt:
            context.append(f"before attempt {self.running_number}, now running")
        elif self.history and self.job_state.is_waiting and self.state != JobState.RETRYING:
            context.append(f"before it was {self.state} again")  # requeued or resubmitted since
        return f"Last error ({', '.join(context)})" if context else "Last error"

    @property
    def max_heartbeat_interval(self) -> float | None:
        value = self.options.get("max_heartbeat_interval")
        return float(value) if isinstance(value, (int, float)) else None


def _from_redis(job: LiveJob) -> JobDetail:
    return JobDetail(
        id=job.id, task=job.task, queue=job.queue, state=job.state.value, priority=job.priority,
        attempts=job.attempts, max_retries=job.max_retries, version=job.version, unique_key=job.unique_key,
        group=job.group, enqueued_at=job.enqueued_at, run_at=job.run_at, started_at=job.started_at,
        finished_at=job.finished_at, heartbeat_at=job.heartbeat_at, worker=job.worker,
        host=job.raw.get("host", ""), pid=job.raw.get("pid", ""), progress=job.progress,
        cancel_requested=job.cancel_requested, reason=job.reason, params=job.params_json, result=job.result_json,
        checkpoint=job.checkpoint_json, last_error=job.last_error_json, history=list(job.history), live=True,
        lease_ms=job.lease_ms, timeout_ms=job.timeout_ms or None, payload_error=job.payload_error,
    )  # fmt: skip


def _from_mirror(row: JobRow) -> JobDetail:
    return JobDetail(
        id=row.id, task=row.task, queue=row.queue, state=row.state, priority=row.priority, attempts=row.attempts,
        max_retries=row.max_retries, version=row.version, unique_key=row.unique_key, group=row.group,
        enqueued_at=row.enqueued_at, run_at=row.run_at, started_at=row.started_at, finished_at=row.finished_at,
        heartbeat_at=row.heartbeat_at, worker=row.worker, host="", pid="", progress=row.progress,
        cancel_requested=row.cancel_requested, reason=row.reason, params=row.params, result=row.result,
        checkpoint=row.checkpoint, last_error=row.last_error, history=list(row.history.order_by("number")),
        live=False, synced_at=row.synced_at,
    )  # fmt: skip


def load(job_id: str) -> JobDetail | None:
    """The job from Redis when Redis holds it, else from the mirror; None when neither knows it."""
    row = JobRow.objects.filter(id=job_id).first()
    queries = get_client().queries
    try:
        detail = _from_redis(queries.jobs.get(job_id, row.queue if row and row.in_redis else None))
    except JobNotFound:
        if row is None:
            return None
        detail = _from_mirror(row)
    if detail.live:
        detail.now = queries.now()  # Redis's clock: lease deadlines and heartbeats are counted in it
        if detail.state == JobState.RUNNING:
            [detail.lease_deadline] = queries.jobs.lease_deadlines([(detail.queue, detail.id)])
        detail.timeline = timeline(detail, queries.events.read(detail.queue, newest_first=True, limit=STREAM_SCAN))
    else:
        detail.timeline = timeline(detail, [])
    detail.options = queries.tasks.options().get(detail.task, {})
    return detail


# A stream entry is stamped by Redis's clock when it is added, which can run a millisecond or two past the time
# the script that added it took at its start (and stamped the attempt it began with).
STREAM_SKEW = timedelta(milliseconds=5)


def _script_time(at: datetime, starts: list[datetime]) -> datetime:
    """An event's time, moved back to the attempt start it came with (a promotion just before a claim), if any."""
    return next((start for start in starts if timedelta(0) <= at - start <= STREAM_SKEW), at)


def timeline(job: JobDetail, events: list[Any]) -> list[Moment]:
    """Every state change known to have happened to the job, oldest first (see the module docstring)."""
    moments: list[Moment] = []
    if job.enqueued_at:
        # run_at is the next due time: it tells of a delay only before the first attempt (a retry moves it).
        later = not job.history and job.run_at and job.run_at - job.enqueued_at > timedelta(seconds=1)
        detail = f"on queue {job.queue}" + (", delayed" if later else "")
        # A job handed straight to an idle worker is stamped enqueued when its intake entry is drained, which
        # can be a millisecond after its lease began; it was enqueued before it started all the same.
        attempt_starts = [a.started_at for a in job.history if a.started_at]
        moments.append(Moment(min([job.enqueued_at, *attempt_starts]), "Enqueued", detail, rank=ENQUEUED))
    for number, a in job.numbered_history:  # numbered over the job's life, as the attempts table
        if a.started_at:
            where = _where(a.worker, a.host, a.pid)
            moments.append(Moment(a.started_at, f"Attempt {number} started", where, "attempt", rank=STARTED))
        if a.ended_at:
            error = f"{a.error_class}: {a.message}" if a.error_class else a.message
            tone = "ok" if a.outcome == "completed" else "bad" if a.error_class else "warn"
            moments.append(Moment(a.ended_at, f"Attempt {number} {a.outcome}", error, "attempt", tone, ENDED))
    if job.running_attempt and job.started_at:
        where = _where(job.worker, job.host, job.pid)
        started = f"Attempt {job.running_number} started (running)"
        moments.append(Moment(job.started_at, started, where, "job", rank=STARTED))
    ended = {a.ended_at for a in job.history if a.ended_at}
    if job.finished_at and job.finished_at not in ended and JobState(job.state).is_terminal:
        moments.append(Moment(job.finished_at, f"Ended {job.state}", job.reason, "job", rank=FINISHED))
    starts = sorted(m.at for m in moments if m.rank == STARTED)
    for event in events:
        if event.job == job.id and event.name in STREAM_ONLY:
            extras = {k: v for k, v in event.fields.items() if k not in ("job", "event", "state", "entry")}
            detail = ", ".join(f"{k} {v}" for k, v in extras.items())
            what = event.name.replace("_", " ").capitalize()
            moments.append(Moment(_script_time(event.at, starts), what, detail, "stream", rank=STREAM))
    if job.run_at and job.state in STATES and STATES[JobState(job.state)].zset == "scheduled":
        moments.append(Moment(job.run_at, "Due", "runs once a worker is free after this", "job", "warn", DUE))
    records = AuditLog.objects.filter(job_ids__icontains=job.id).order_by("-at")[:AUDIT_ROWS]
    for record in records:
        if job.id not in record.job_ids:
            continue  # the text search matched a longer id
        detail = f"by {record.actor}" + (f": {record.reason}" if record.reason else "")
        if record.refused:
            detail += " (refused: the job had moved on)"
        what = f"Operator: {record.action.replace('_', ' ')}"
        moments.append(Moment(record.at, what, detail, "audit", rank=AUDIT))
    moments.sort(key=lambda m: (m.at, m.rank))
    return moments


def _where(worker: str, host: str, pid: object) -> str:
    parts = [f"on {worker}" if worker else "", f"host {host}" if host else "", f"pid {pid}" if pid else ""]
    return " ".join(p for p in parts if p)
