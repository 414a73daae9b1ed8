"""Workers: every registered worker, live or gone, with what it runs; quiet, resume or stop one, or a host's."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboards.permissions import operate_required, view_required
from dashboards.rendering import page
from jobconsole.controls import DOES, ControlError, control_workers
from jobconsole.core import JobState
from jobconsole.core.job import Job
from jobconsole.core.queries.workers import WorkerInfo
from jobconsole.engine import get_client

# A worker beats every second (core/worker/liveness.py); a recoverer declares it gone 3 s after its last beat
# (WORKER_EXPIRY) and takes its jobs back, and its record, with when and why, stays an hour. One silent for this
# long without being declared gone (no recoverer runs) is shown as not heartbeating.
SILENT_AFTER = timedelta(seconds=10)
RUNNING_SCAN = 500  # running jobs read per queue to find those of gone workers


@dataclass(slots=True)
class WorkerRow:
    info: WorkerInfo
    status: str  # running, quiet, stopping, silent (no heartbeat lately), gone (entry expired)
    jobs: list[dict[str, Any]] = field(default_factory=list)  # what it runs, or ran when it went silent

    @property
    def uptime(self) -> timedelta | None:
        if self.info.started_at is None or self.status == "gone":
            return None
        return timezone.now() - self.info.started_at


def _status(info: WorkerInfo, now: datetime) -> str:
    if info.state == "gone":
        return "gone"
    if info.heartbeat_at is not None and now - info.heartbeat_at > SILENT_AFTER:
        return "silent"
    return info.state


def _jobs_of(worker_ids: set[str]) -> dict[str, list[Job]]:
    """Running jobs still leased to workers that stopped heartbeating (they wait for the recoverer)."""
    queries = get_client().queries
    out: dict[str, list[Job]] = {w: [] for w in worker_ids}
    for queue in queries.queues.names():
        for job in queries.jobs.page(queue, JobState.RUNNING, limit=RUNNING_SCAN).jobs:
            if job.worker in out:
                out[job.worker].append(job)
    return out


@view_required
def worker_list(request: HttpRequest) -> HttpResponse:
    return _page(request)


def _page(request: HttpRequest, status: int = 200) -> HttpResponse:
    now = timezone.now()
    rows = [WorkerRow(info, _status(info, now)) for info in get_client().queries.workers.all()]
    lost = {row.info.id for row in rows if row.status in ("gone", "silent")}
    held = _jobs_of(lost) if lost else {}
    for row in rows:
        if row.info.id in held:
            row.jobs = [
                {"id": j.id, "queue": j.queue, "task": j.task, "attempt": j.attempts} for j in held[row.info.id]
            ]
        else:
            row.jobs = row.info.current
    rows.sort(key=lambda r: (r.status not in ("running", "quiet"), r.info.host, r.info.id))
    live = [r for r in rows if r.status in ("running", "quiet", "stopping")]
    context = {
        "rows": rows,
        "live": len(live),
        "threads": sum(r.info.concurrency for r in live),
        "busy": sum(len(r.info.current) for r in live),
        "processed": sum(r.info.processed for r in live),
        "failed": sum(r.info.failed for r in live),
        "lost": len(lost),
        "silent_after": SILENT_AFTER.total_seconds(),
        "quiet": sum(1 for r in live if r.status == "quiet"),
        "hosts": sorted({r.info.host for r in live if r.info.host}),
    }
    return page(request, "dashboards/workers.html", "workers", context, partial="live", status=status)


@require_POST
@operate_required("queue")
def worker_control(request: HttpRequest) -> HttpResponse:
    """Quiet, resume or stop a worker (`worker`) or every worker of a host (`host`); audited."""
    form = request.POST
    action = form.get("action", "")
    target = {"worker": form["worker"]} if form.get("worker") else {"host": form["host"]} if form.get("host") else {}
    try:
        done = control_workers(request.user, action, reason=form.get("reason", ""), **target)
    except ControlError as exc:
        messages.error(request, f"Nothing changed: {exc}")
        return _page(request, status=exc.status)
    if "worker" in target:
        named = f"Worker {target['worker']}"
    else:
        named = f"{len(done.outcomes)} worker(s) of {target['host']}"
    if done.changed:
        messages.success(request, f"{named} {DOES[action]}. Each acts on it within about 2 s.")
    else:
        messages.info(request, f"{named}: nothing to change (already so, or stopping).")
    return redirect("dashboards:workers")
