"""What the API answers with: the JSON of jobs, attempts, dead letters, queues, workers and bulk operations, and
their schemas (components of the OpenAPI document). Times are RFC 3339 strings in UTC, durations seconds."""

import json
from datetime import datetime
from typing import Any

from jobconsole.bulk.progress import progress
from jobconsole.core.job import Attempt as LiveAttempt
from jobconsole.core.job import Job as LiveJob
from jobconsole.core.queries.queues import QueueCounts
from jobconsole.core.queries.workers import WorkerInfo
from jobconsole.core.results import EnqueueResult
from jobconsole.core.states import STATE_OF_SET
from jobconsole.core.workflows import JobLinks
from jobconsole.models import Attempt as AttemptRow
from jobconsole.models import BulkOperation, DeadLetter, JobLink
from jobconsole.models import Job as JobRow
from jobconsole_api.v1.schema import Schema, any_object, array, boolean, integer, nullable, number, obj, ref, string


def iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def _json_or_text(text: str) -> Any:
    """Stored JSON text decoded; text that is not JSON (written by other hands) as it is."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


TIME = nullable(string(format="date-time"))
TEXT = string()

SCHEMAS: dict[str, Schema] = {
    "Submitted": obj(
        {
            "id": string("the job's id (for status 'duplicate': the live job holding the unique key)"),
            "queue": TEXT,
            "state": TEXT,
            "status": string(
                "created; exists (this id was submitted before: nothing new); duplicate (the unique "
                "key is held by a live job: nothing new); conflict (batch only: the id was used for "
                "another task or other parameters)",
                enum=["created", "exists", "duplicate", "conflict"],
            ),
        },
        ("id", "queue", "state", "status"),
    ),
    "Attempt": obj(
        {
            "attempt": integer(),
            "outcome": TEXT,
            "worker": TEXT,
            "host": TEXT,
            "pid": integer(),
            "started_at": TIME,
            "ended_at": TIME,
            "duration": nullable(number()),
            "error_class": TEXT,
            "message": TEXT,
            "traceback": TEXT,
            "top_frame": TEXT,
        },
        ("attempt", "outcome", "started_at", "ended_at"),
    ),
    "JobSummary": obj(
        {
            "id": TEXT,
            "task": TEXT,
            "queue": TEXT,
            "state": TEXT,
            "priority": integer(),
            "attempts": integer(),
            "max_retries": integer(),
            "unique_key": TEXT,
            "enqueued_at": TIME,
            "run_at": TIME,
            "started_at": TIME,
            "finished_at": TIME,
            "worker": TEXT,
            "error_class": TEXT,
            "params_preview": string("the start of the parameters' JSON text"),
        },
        ("id", "task", "queue", "state"),
    ),
    "Job": obj(
        {
            "id": TEXT,
            "task": TEXT,
            "queue": TEXT,
            "state": TEXT,
            "priority": integer(),
            "attempts": integer(),
            "max_retries": integer(),
            "version": integer(),
            "unique_key": TEXT,
            "params": {"description": "the parameters (the stored text when it is not JSON)"},
            "result": {"description": "the task's return value, null until it completed"},
            "progress": nullable(number()),
            "cancel_requested": boolean(),
            "reason": TEXT,
            "last_error": {"description": "the last failed attempt's error, null when none"},
            "enqueued_at": TIME,
            "run_at": TIME,
            "started_at": TIME,
            "finished_at": TIME,
            "heartbeat_at": TIME,
            "worker": TEXT,
            "in_redis": boolean("false: Redis has dropped the job (retention); this is the database's copy"),
            "history": array(ref("Attempt")),
            # Its links (docs/workflows.md); once Redis dropped the job, as the mirror kept them:
            "workflow": nullable(obj({"id": TEXT, "step": TEXT}, ("id", "step"), "the workflow it is a step of")),
            "parents": array(
                obj(
                    {
                        "id": TEXT,
                        "queue": TEXT,
                        "step": TEXT,
                        "policy": string(enum=["cancel", "run"]),
                        "ended": string("the state the parent ended in, as this job saw it; '' while it has not"),
                    },
                    ("id", "queue", "policy", "ended"),
                ),
                "the jobs it waits (or waited) for, in order",
            ),
            "dependents": array(obj({"id": TEXT, "queue": TEXT}, ("id", "queue")), "the jobs waiting for it"),
        },
        ("id", "task", "queue", "state", "history", "in_redis"),
    ),
    "DeadLetter": obj(
        {
            "id": integer("the dead letter's own id (one per death)"),
            "job_id": TEXT,
            "queue": TEXT,
            "task": TEXT,
            "version": integer(),
            "died_at": TIME,
            "attempts": integer(),
            "error_class": TEXT,
            "message": TEXT,
            "top_frame": TEXT,
            "fingerprint": string("groups deaths by cause (error class and top frame)"),
            "resubmitted_at": TIME,
            "resubmitted_by": TEXT,
        },
        ("id", "job_id", "queue", "task", "died_at"),
    ),
    "Queue": obj(
        {
            "name": TEXT,
            "paused": boolean(),
            # Jobs per state set (core/states.py); "scheduled" counts retrying jobs too, which share its set.
            **{state: integer() for state in STATE_OF_SET.values()},
        },
        ("name", "paused"),
    ),
    "Schedule": obj(
        {
            "name": TEXT,
            "origin": string("where it is defined: settings (read-only here) or database"),
            "task": TEXT,
            "params": any_object(),
            "cron": nullable(string("5-field cron or a macro, read in the schedule's time zone")),
            "every_seconds": nullable(number("a fixed interval instead of cron")),
            "queue": nullable(string("null: the task's queue")),
            "priority": {"type": ["integer", "string", "null"], "description": "null: the task's priority"},
            "enabled": boolean(),
            "misfire": string("slots missed while no scheduler ran: skip, or run_once", enum=["skip", "run_once"]),
            "timezone": TEXT,
            "last_fired_at": nullable(string(format="date-time")),
            "last_job_id": nullable(string()),
            "next_runs": array(string(format="date-time"), "the next 5 slots (none while disabled)"),
        },
        ("name", "origin", "task", "enabled", "misfire", "next_runs"),
    ),
    "Worker": obj(
        {
            "id": TEXT,
            "host": TEXT,
            "pid": integer(),
            "queues": array(TEXT),
            "concurrency": integer(),
            "active_threads": integer(),
            "state": string("running, quiet (takes no new jobs), stopping, or gone (it stopped heartbeating)"),
            "control": string("an operator's quiet or stop, before the worker acts on it; empty: none"),
            "busy": integer("jobs it runs now, of its concurrency"),
            "uptime_s": nullable(number("seconds since it started (Redis's clock)")),
            "started_at": TIME,
            "heartbeat_at": TIME,
            "processed": integer(),
            "failed": integer(),
            "current": array(any_object(), "the jobs it runs now"),
            "gone_at": nullable(string("when a recoverer declared it gone", format="date-time")),
            "gone_reason": string("why, in words (empty while it lives)"),
            "jobs_taken_back": integer("its running jobs the recoverer took back when it was declared gone"),
        },
        ("id", "state"),
    ),
    "Operation": obj(
        {
            "id": integer(),
            "kind": TEXT,
            "status": string(enum=[s.value for s in BulkOperation.Status]),
            "actor": TEXT,
            "reason": TEXT,
            "selection": any_object(),
            "options": any_object(),
            "created_at": TIME,
            "started_at": TIME,
            "finished_at": TIME,
            "total": integer(),
            "done": integer(),
            "refused": integer(),
            "failed": integer(),
            "processed": integer(),
            "chunks": integer(),
            "chunks_done": integer(),
            "percent": integer(),
            "cancel_requested": boolean(),
            "rate": nullable(number("jobs per second")),
            "seconds_left": nullable(number()),
            "stalled": boolean("running, but no chunk finished for a minute: its system job may be lost"),
        },
        ("id", "kind", "status", "total", "done", "refused", "failed"),
    ),
}


def submitted(result: EnqueueResult, status: str | None = None) -> dict[str, Any]:
    return {"id": result.id, "queue": result.queue, "state": str(result.state), "status": status or result.status}


def attempt(a: LiveAttempt | AttemptRow) -> dict[str, Any]:
    duration = a.duration
    return {
        "attempt": a.attempt, "outcome": a.outcome, "worker": a.worker, "host": a.host, "pid": a.pid,
        "started_at": iso(a.started_at), "ended_at": iso(a.ended_at), "duration": duration,
        "error_class": a.error_class, "message": a.message, "traceback": a.traceback, "top_frame": a.top_frame,
    }  # fmt: skip


def live_job(job: LiveJob, links: JobLinks | None = None) -> dict[str, Any]:
    """A job Redis holds; `links`: its parents and dependents (None: it has neither)."""
    workflow = {"id": job.raw["workflow"], "step": job.raw.get("step", "")} if job.raw.get("workflow") else None
    parents = [{"id": p.job_id, "queue": p.queue, "step": p.step, "policy": p.policy, "ended": p.ended}
               for p in links.parents] if links else []  # fmt: skip
    dependents = [{"id": job_id, "queue": queue} for queue, job_id in links.children] if links else []
    return {
        "id": job.id, "task": job.task, "queue": job.queue, "state": str(job.state), "priority": job.priority,
        "attempts": job.attempts, "max_retries": job.max_retries, "version": job.version,
        "unique_key": job.unique_key, "params": _json_or_text(job.params_json), "result": job.result,
        "progress": job.progress, "cancel_requested": job.cancel_requested, "reason": job.reason,
        "last_error": _json_or_text(job.last_error_json), "enqueued_at": iso(job.enqueued_at),
        "run_at": iso(job.run_at), "started_at": iso(job.started_at), "finished_at": iso(job.finished_at),
        "heartbeat_at": iso(job.heartbeat_at), "worker": job.worker, "in_redis": True,
        "history": [attempt(a) for a in job.history], "workflow": workflow, "parents": parents,
        "dependents": dependents,
    }  # fmt: skip


def stored_links(row: JobRow) -> dict[str, Any]:
    """A mirrored job's workflow, parents and dependents, from the mirror's rows (JobLink: written once, when the
    mirror first saw the job; a parent's `ended` is not kept there: '')."""
    parents = list(JobLink.objects.filter(child_id=row.id).order_by("position"))
    children = list(JobLink.objects.filter(parent_id=row.id).order_by("child_id").values_list("child_id", flat=True))
    known = dict(JobRow.objects.filter(id__in=[p.parent_id for p in parents] + children).values_list("id", "step"))
    queues = dict(JobRow.objects.filter(id__in=children).values_list("id", "queue")) if children else {}
    return {
        "workflow": {"id": row.workflow_id, "step": row.step} if row.workflow_id else None,
        "parents": [{"id": p.parent_id, "queue": p.parent_queue, "step": known.get(p.parent_id, ""),
                     "policy": p.policy, "ended": ""} for p in parents],
        "dependents": [{"id": child, "queue": queues.get(child, "")} for child in children],
    }  # fmt: skip


def stored_job(row: JobRow) -> dict[str, Any]:
    return {
        "id": row.id, "task": row.task, "queue": row.queue, "state": row.state, "priority": row.priority,
        "attempts": row.attempts, "max_retries": row.max_retries, "version": row.version,
        "unique_key": row.unique_key, "params": _json_or_text(row.params), "result": _json_or_text(row.result),
        "progress": row.progress, "cancel_requested": row.cancel_requested, "reason": row.reason,
        "last_error": _json_or_text(row.last_error), "enqueued_at": iso(row.enqueued_at), "run_at": iso(row.run_at),
        "started_at": iso(row.started_at), "finished_at": iso(row.finished_at),
        "heartbeat_at": iso(row.heartbeat_at), "worker": row.worker, "in_redis": False,
        "history": [attempt(a) for a in row.history.order_by("number")], **stored_links(row),
    }  # fmt: skip


def job_summary(row: JobRow) -> dict[str, Any]:
    return {
        "id": row.id, "task": row.task, "queue": row.queue, "state": row.state, "priority": row.priority,
        "attempts": row.attempts, "max_retries": row.max_retries, "unique_key": row.unique_key,
        "enqueued_at": iso(row.enqueued_at), "run_at": iso(row.run_at), "started_at": iso(row.started_at),
        "finished_at": iso(row.finished_at), "worker": row.worker, "error_class": row.error_class,
        "params_preview": getattr(row, "params_preview", ""),
    }  # fmt: skip


def live_summary(job: LiveJob) -> dict[str, Any]:
    return {
        "id": job.id, "task": job.task, "queue": job.queue, "state": str(job.state), "priority": job.priority,
        "attempts": job.attempts, "max_retries": job.max_retries, "unique_key": job.unique_key,
        "enqueued_at": iso(job.enqueued_at), "run_at": iso(job.run_at), "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at), "worker": job.worker, "error_class": job.error_class,
        "params_preview": job.params_json[:160],
    }  # fmt: skip


def dead_letter(letter: DeadLetter) -> dict[str, Any]:
    return {
        "id": letter.pk, "job_id": letter.job_id, "queue": letter.queue, "task": letter.task,
        "version": letter.version, "died_at": iso(letter.died_at), "attempts": letter.attempts,
        "error_class": letter.error_class, "message": letter.message, "top_frame": letter.top_frame,
        "fingerprint": letter.fingerprint, "resubmitted_at": iso(letter.resubmitted_at),
        "resubmitted_by": letter.resubmitted_by,
    }  # fmt: skip


def queue(counts: QueueCounts) -> dict[str, Any]:
    return {"name": counts.queue, "paused": counts.paused, **counts.by_state()}


def worker(info: WorkerInfo) -> dict[str, Any]:
    return {
        "id": info.id, "host": info.host, "pid": info.pid, "queues": info.queues, "concurrency": info.concurrency,
        "active_threads": info.active_threads, "state": info.state, "started_at": iso(info.started_at),
        "heartbeat_at": iso(info.heartbeat_at), "processed": info.processed, "failed": info.failed,
        "current": info.current, "control": info.control, "busy": len(info.current),
        "uptime_s": _uptime(info), "gone_at": iso(info.gone_at), "gone_reason": info.gone_reason,
        "jobs_taken_back": info.jobs_taken_back,
    }  # fmt: skip


def _uptime(info: WorkerInfo) -> float | None:
    if info.started_at is None or info.state == "gone":
        return None
    ended = info.heartbeat_at or info.started_at
    return round(max(0.0, (ended - info.started_at).total_seconds()), 3)


def operation(op: BulkOperation) -> dict[str, Any]:
    p = progress(op)
    return {
        "id": op.pk, "kind": op.kind, "status": op.status, "actor": op.actor, "reason": op.reason,
        "selection": op.selection, "options": op.options, "created_at": iso(op.created_at),
        "started_at": iso(p.started_at), "finished_at": iso(p.finished_at), "total": p.total, "done": p.done,
        "refused": p.refused, "failed": p.failed, "processed": p.processed, "chunks": p.chunks,
        "chunks_done": p.chunks_done, "percent": p.percent, "cancel_requested": p.cancel_requested,
        "rate": p.rate, "seconds_left": p.seconds_left, "stalled": p.stalled,
    }  # fmt: skip
