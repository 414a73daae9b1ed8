"""What the console's buttons do to one job: retry, cancel, delete, recover, each through the engine, with an
audit record and a message for the operator. The views check permissions; this module only acts.

A running job cannot be requeued (the engine refuses: its worker may still be running it). When its lease has
run out, the engine's recovery (what the recoverer does at its next pass) puts it back safely: the worker that
held it, if it is still alive, has its result refused, since the job gets a new lease token. So "requeue now"
for a stalled job runs that recovery for the job's queue, and cancelling a job whose lease ran out recovers
it first (a cancel request alone would be lost: the recovered job starts afresh).
"""

from dataclasses import dataclass

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser

from jobconsole import audit
from jobconsole.conf import retention
from jobconsole.core import DuplicateJob, InvalidJob, JobNotFound, JobQueueError, JobState, JobStateConflict
from jobconsole.core.editing import edit_job
from jobconsole.core.states import RESUBMITTABLE_STATES
from jobconsole.engine import get_client
from jobconsole.models import Job as JobRow

RECOVER_BATCH = 200

# Who acts: a Django user (the console, the admin), or the name of a caller that is none (an API token).
type User = AbstractBaseUser | AnonymousUser | str


@dataclass(slots=True)
class Outcome:
    """What an action did, for the operator's message: `ok` decides its level."""

    ok: bool
    message: str
    refusal: JobQueueError | None = None  # why the engine refused, for callers that answer by kind (the HTTP API)


def why_refused(exc: JobQueueError) -> str:
    """An engine refusal in an operator's words."""
    if isinstance(exc, JobStateConflict):
        return f"it is {exc.state}"
    if isinstance(exc, JobNotFound):
        return "Redis no longer holds it"
    if isinstance(exc, DuplicateJob):
        return f"its unique key {exc.unique_key!r} is held by live job {exc.job_id}"
    return str(exc)


def queue_of(job_id: str) -> str | None:
    """The queue holding the job in Redis, None when Redis no longer has it."""
    try:
        return get_client().queries.jobs.locate(job_id)
    except JobNotFound:
        return None


def _refused(user: User, action: str, job_id: str, queue: str, reason: str, exc: JobQueueError) -> Outcome:
    why = why_refused(exc)
    audit.record(user, action, job_ids=[job_id], queue=queue, count=0, refused=1, reason=reason,
                 detail={"refused": {job_id: why}})  # fmt: skip
    return Outcome(False, f"Nothing was done to job {job_id}: {why}.", exc)


def retry(user: User, job_id: str, reason: str = "", *, reset_attempts: bool = False) -> Outcome:
    """Run a waiting job now, or bring back a dead, failed, dropped or cancelled one (history kept)."""
    queue = queue_of(job_id) or ""
    try:
        get_client().requeue(job_id, queue or None, reset_attempts=reset_attempts)
    except JobQueueError as exc:
        return _refused(user, "retry", job_id, queue, reason, exc)
    audit.record(user, "retry", job_ids=[job_id], queue=queue, reason=reason, detail={"reset_attempts": reset_attempts})
    return Outcome(True, f"Job {job_id} is queued: a worker runs it next.")


def _lease_ran_out(queue: str, job_id: str) -> bool:
    queries = get_client().queries
    [deadline] = queries.jobs.lease_deadlines([(queue, job_id)])
    return deadline is not None and deadline <= queries.now()


def recover_expired(queue: str) -> tuple[list[str], list[str]]:
    """The recoverer's pass over one queue, now: every job whose lease ran out is requeued (a `worker_lost`
    attempt) or, with its attempts used up, dead-lettered. Returns (requeued ids, dead-lettered ids)."""
    store = get_client().store
    ttl_ms = int(retention()[JobState.FAILED] * 1000)
    requeued: list[str] = []
    ended: list[str] = []
    while True:
        done = store.recover(queue, limit=RECOVER_BATCH, outage_ms=0, ttl_ms=ttl_ms)
        requeued += done.requeued
        ended += done.ended
        if len(done.requeued) + len(done.ended) < RECOVER_BATCH:
            return requeued, ended


def recover(user: User, job_id: str, reason: str = "") -> Outcome:
    """Requeue a stalled running job whose lease ran out (see the module docstring); refused while its lease
    is still valid: its worker may be running it, and the recoverer requeues it once the lease runs out."""
    queue = queue_of(job_id)
    if queue is None:
        return _refused(user, "recover", job_id, "", reason, JobNotFound(job_id))
    state = get_client().queries.jobs.get(job_id, queue, history=False).state
    if state is not JobState.RUNNING:
        return _refused(user, "recover", job_id, queue, reason, JobStateConflict(job_id, state, "recover"))
    if not _lease_ran_out(queue, job_id):
        audit.record(user, "recover", job_ids=[job_id], queue=queue, count=0, refused=1, reason=reason,
                     detail={"refused": {job_id: "its lease is still valid"}})  # fmt: skip
        return Outcome(
            False,
            f"Job {job_id} was not requeued: its lease is still valid, so its worker may still be running it. "
            "Once the lease runs out (the worker stops renewing the lease of a stalled task) the recoverer "
            "requeues it, or press this again then.",
            JobStateConflict(job_id, "running with a valid lease", "recover"),
        )
    requeued, ended = recover_expired(queue)
    audit.record(user, "recover", job_ids=[*requeued, *ended], queue=queue, reason=reason,
                 detail={"requeued": requeued, "dead_lettered": ended, "asked_for": job_id})  # fmt: skip
    others = len(requeued) + len(ended) - (job_id in requeued or job_id in ended)
    also = f" The recovery also took {others} other job(s) of queue {queue} whose lease had run out." if others else ""
    if job_id in ended:
        return Outcome(True, f"Job {job_id} had used up its attempts: it is dead-lettered (attempt recorded as "
                             f"worker_lost).{also}")  # fmt: skip
    if job_id in requeued:
        return Outcome(True, f"Job {job_id} is queued again (its attempt recorded as worker_lost).{also}")
    return Outcome(False, f"Job {job_id} had already been recovered or finished meanwhile.{also}")


def cancel(user: User, job_id: str, reason: str = "") -> Outcome:
    """Cancel a waiting job, or ask a running one to stop. A running job whose lease ran out is recovered
    first, then cancelled (its worker is gone or stalled and would never see a request)."""
    queue = queue_of(job_id) or ""
    client = get_client()
    recovered = False
    try:
        running = queue and client.queries.jobs.get(job_id, queue, history=False).state is JobState.RUNNING
        if running and _lease_ran_out(queue, job_id):
            requeued, ended = recover_expired(queue)
            recovered = job_id in requeued
            if job_id in ended:
                raise JobStateConflict(job_id, "dead (its attempts were used up when its lease ran out)", "cancel")
        outcome = client.cancel(job_id, queue or None)
    except JobQueueError as exc:
        return _refused(user, "cancel", job_id, queue, reason, exc)
    audit.record(user, "cancel", job_ids=[job_id], queue=queue, reason=reason,
                 detail={"outcome": outcome, "recovered_first": recovered})  # fmt: skip
    if outcome == "requested":
        return Outcome(True, f"Job {job_id} is running: it was asked to stop. The task sees the request at its "
                             "next heartbeat and ends as cancelled.")  # fmt: skip
    first = " Its lease had run out, so it was recovered first." if recovered else ""
    return Outcome(True, f"Job {job_id} is cancelled.{first}")


def delete(user: User, job_id: str, reason: str = "") -> Outcome:
    """Delete from Redis (refused while running) and from the database, also when Redis had already dropped
    it (the mirror's row is then the only trace left, and the operator asked for it gone)."""
    queue = queue_of(job_id) or ""
    if queue:
        try:
            get_client().delete(job_id, queue)
        except JobQueueError as exc:
            if not isinstance(exc, JobNotFound):
                return _refused(user, "delete", job_id, queue, reason, exc)
    rows, _ = JobRow.objects.filter(id=job_id).delete()
    if not queue and not rows:
        return Outcome(False, f"Job {job_id} was already gone from Redis and the database.", JobNotFound(job_id))
    audit.record(user, "delete", job_ids=[job_id], queue=queue, reason=reason,
                 detail={"in_redis": bool(queue)})  # fmt: skip
    return Outcome(True, f"Job {job_id} is deleted{'' if queue else ' from the database (Redis had dropped it)'}.")


@dataclass(frozen=True, slots=True)
class Edit:
    """An edit-and-retry as the operator saw the job (the compare-and-set's expectations) and changed it."""

    expected_state: JobState
    expected_attempts: int
    params: dict[str, object] | None
    priority: int | None
    reset_attempts: bool = False
    reason: str = ""


RESUBMITTABLE = RESUBMITTABLE_STATES


def edit_and_retry(user: User, job_id: str, edit: Edit) -> Outcome:
    """A waiting job: its parameters and priority changed in place. A finished one (dead, failed, dropped,
    cancelled): changed and requeued in the same step. Either only if the job is still in the state and at the
    attempt count the operator saw (else nothing changes and the message says the job moved on)."""
    queue = queue_of(job_id)
    if queue is None:
        return Outcome(False, f"Nothing was changed: Redis no longer holds job {job_id}.", JobNotFound(job_id))
    resubmit = edit.expected_state in RESUBMITTABLE
    changes: dict[str, object] = {}
    if edit.params is not None:
        changes["params"] = edit.params
    if edit.priority is not None:
        changes["priority"] = edit.priority
    if not changes and not resubmit:
        return Outcome(
            False, "Nothing was changed: the parameters and priority are as they were.", InvalidJob("nothing to change")
        )
    try:
        result = edit_job(
            get_client(), job_id, queue=queue, expected_state=edit.expected_state,
            expected_attempts=edit.expected_attempts, resubmit=resubmit,
            reset_attempts=resubmit and edit.reset_attempts, **changes,  # type: ignore[arg-type]
        )  # fmt: skip
    except JobStateConflict as exc:
        return Outcome(
            False,
            f"Nothing was changed: the job moved on since this page was loaded (it was {edit.expected_state} "
            f"after {edit.expected_attempts} attempt(s); it is now {exc.state}). Here it is as it is now.",
            exc,
        )
    except (JobNotFound, DuplicateJob, InvalidJob) as exc:
        return Outcome(False, f"Nothing was changed: {why_refused(exc)}.", exc)
    action = "resubmit_edited" if resubmit else "edit_job"
    audit.record(user, action, job_ids=[job_id], queue=queue, reason=edit.reason,
                 detail={"changes": {k: str(v) for k, v in changes.items()}, "state": str(result.state),
                         "reset_attempts": resubmit and edit.reset_attempts})  # fmt: skip
    if resubmit:
        return Outcome(True, f"Job {job_id} was changed and resubmitted: it is {result.state}.")
    return Outcome(True, f"Job {job_id} was changed in Redis (it is {result.state}).")
