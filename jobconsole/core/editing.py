"""Operator edits of a job, as compare-and-set operations (lua/edit.lua).

The operator saw the job in some state (from the console, possibly a little behind Redis); the edit
applies only if the job is still in that state with the same attempt count, so a job that started,
finished or was retried meanwhile is never changed behind its back.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobconsole.core import scripts
from jobconsole.core.client import Client, encode_params
from jobconsole.core.errors import DuplicateJob, InvalidJob, JobNotFound, JobStateConflict
from jobconsole.core.keys import queue_keys
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
    (dead, failed, dropped, cancelled) job's parameters or priority and requeue it in the same step.

    Raises JobStateConflict if the job is no longer in `expected_state` (or its attempt count changed),
    JobNotFound, DuplicateJob (resubmitting would clash with a live job's unique key), or InvalidJob."""
    k = client.job_keys(job_id, queue)
    expected = JobState(expected_state)
    run_at_ms: scripts.Arg = ""
    if run_at is not None:
        if resubmit:
            raise InvalidJob("a resubmitted job runs now; run_at cannot be changed with resubmit")
        if not isinstance(run_at, datetime) or run_at.tzinfo is None:
            raise InvalidJob("run_at must be a timezone-aware datetime")
        run_at_ms = int(run_at.timestamp() * 1000)
    priority_arg: scripts.Arg = "" if priority is None else parse_priority(priority)
    params_arg: scripts.Arg = ""
    if params is not None:
        params_arg = _check_params(client, k.job(job_id), params)
    if params is None and priority is None and run_at is None and not resubmit:
        raise InvalidJob("nothing to change")
    status, state = scripts.run(
        client.redis, "edit",
        [k.ready, k.scheduled, k.dead, k.failed, k.dropped, k.cancelled, k.unique, k.events, k.wake, k.seq],
        [k.job_prefix, client.events_maxlen, job_id, expected.value,
         "" if expected_attempts is None else expected_attempts, priority_arg, run_at_ms, params_arg,
         int(resubmit), int(reset_attempts)],
    )  # fmt: skip
    if status in ("edited", "resubmitted"):
        return EditResult(job_id, status, JobState(state))
    if status == "missing":
        raise JobNotFound(f"no job {job_id}")
    if status == "duplicate":
        raise DuplicateJob(job_id, str(client.redis.hget(k.job(job_id), "unique_key") or ""))
    if status == "invalid":
        raise InvalidJob("a resubmitted job runs now; run_at cannot be changed with resubmit")
    operation = "resubmit" if resubmit else "edit"
    if state == expected.value:
        raise JobStateConflict(job_id, f"{state} (attempt count changed)", operation)
    raise JobStateConflict(job_id, state, operation)


def _check_params(client: Client, job_key: str, params: dict[str, Any]) -> str:
    """Validated like an enqueue: a JSON object with string keys, within the size limit, and accepted by
    the task's signature when this process has the task registered."""
    task_name = client.redis.hget(job_key, "task")
    return encode_params(params, client.registry.find(str(task_name)) if task_name else None)


def delete_many(client: Client, jobs: list[tuple[str, str]]) -> list[str]:
    """Delete many (job id, queue) pairs in one round trip; per job 'deleted', 'missing' or 'running'
    (a running job is never deleted: cancel it first)."""
    calls: list[scripts.Call] = []
    for job_id, queue in jobs:
        k = queue_keys(queue)
        calls.append(
            (
                "delete",
                [k.ready, k.scheduled, k.completed, k.failed, k.dead, k.dropped, k.cancelled, k.unique, k.events],
                [k.job_prefix, client.events_maxlen, job_id],
            )
        )
    out: list[str] = []
    for reply in scripts.run_many(client.redis, calls):
        if isinstance(reply, Exception):
            raise reply
        out.append(str(reply))
    return out
