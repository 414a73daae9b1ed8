"""Operator edits of a job, as compare-and-set operations (lua/edit.lua).

The operator saw the job in some state (from the console, possibly a little behind Redis); the edit
applies only if the job is still in that state with the same attempt count, so a job that started,
finished or was retried meanwhile is never changed behind its back.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobconsole.core.client import Client, encode_params
from jobconsole.core.errors import DuplicateJob, InvalidJob, JobNotFound, JobStateConflict
from jobconsole.core.priority import parse_priority
from jobconsole.core.states import JobState


@dataclass(frozen=True, slots=True)
class EditResult:
    id: str
    status: str  # 'edited' or 'resubmitted'
    state: JobState


def edit_job(
    client: Client,
    job_id: str,
    *,
    expected_state: JobState | str,
    expected_attempts: int | None = None,
    queue: str | None = None,
    priority: int | str | None = None,
    run_at: datetime | None = None,
    params: dict[str, Any] | None = None,
    resubmit: bool = False,
    reset_attempts: bool = False,
) -> EditResult:
    """Change a waiting job's priority, run-at or parameters; or, with resubmit=True, change a finished
    (dead, failed, dropped, cancelled) job's parameters or priority and requeue it in the same step (with
    a future run_at it waits in the scheduled set until then).

    Raises JobStateConflict if the job is no longer in `expected_state` (or its attempt count changed),
    JobNotFound, DuplicateJob (resubmitting would clash with a live job's unique key), or InvalidJob."""
    queue = client.job_queue(job_id, queue)
    expected = JobState(expected_state)
    run_at_ms: int | None = None
    if run_at is not None:
        if not isinstance(run_at, datetime) or run_at.tzinfo is None:
            raise InvalidJob("run_at must be a timezone-aware datetime")
        run_at_ms = int(run_at.timestamp() * 1000)
    params_json = None if params is None else _check_params(client, queue, job_id, params)
    if params is None and priority is None and run_at is None and not resubmit:
        raise InvalidJob("nothing to change")
    status, state = client.store.edit(
        queue, job_id, expected_state=expected.value, expected_attempts=expected_attempts,
        priority=None if priority is None else parse_priority(priority), run_at_ms=run_at_ms,
        params_json=params_json, resubmit=resubmit, reset_attempts=reset_attempts,
    )  # fmt: skip
    if status in ("edited", "resubmitted"):
        return EditResult(job_id, status, JobState(state))
    if status == "missing":
        raise JobNotFound(f"no job {job_id}")
    if status == "duplicate":
        raise DuplicateJob(job_id, client.get(job_id, queue, history=False).unique_key)
    operation = "resubmit" if resubmit else "edit"
    if state == expected.value:
        raise JobStateConflict(job_id, f"{state} (attempt count changed)", operation)
    raise JobStateConflict(job_id, state, operation)


def _check_params(client: Client, queue: str, job_id: str, params: dict[str, Any]) -> str:
    """Validated like an enqueue: a JSON object with string keys, within the size limit, and accepted by
    the task's signature when this process has the task registered."""
    try:
        task_name = client.get(job_id, queue, history=False).task
    except JobNotFound:
        task_name = ""
    return encode_params(params, client.registry.find(task_name) if task_name else None)


def delete_many(client: Client, jobs: list[tuple[str, str]]) -> list[str]:
    """Delete many (job id, queue) pairs in one round trip; per job 'deleted', 'missing' or 'is:running'
    (a running job is never deleted: cancel it first)."""
    out: list[str] = []
    for reply in client.store.run_many([client.store.delete_call(queue, job_id) for job_id, queue in jobs]):
        if isinstance(reply, Exception):
            raise reply
        out.append(reply)
    return out
