"""One operator action applied to many jobs in one pipelined round trip: the step a bulk operation repeats
for each chunk of its frozen set of jobs.

Every per-job call is the same atomic script an operator's single action runs, with its compare-and-set (a
resubmit applies only to a job still dead, with the attempt count the operator saw; a purge deletes only a job
still dead), plus a stamp: the bulk operation's id, recorded in the job hash by the step that applies the
change. Running the same batch again with the same stamp changes nothing and answers ALREADY for every job
the first run changed, so a chunk interrupted between its Redis step and its bookkeeping is simply run again.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from jobconsole.core.client import Client
from jobconsole.core.store import Call


class BatchAction(StrEnum):
    RESUBMIT = "resubmit"  # dead -> queued (or scheduled, with a run-at), compare-and-set on state and attempts
    PURGE = "purge"  # dead -> gone (only while still dead)
    RETRY = "retry"  # waiting -> run now; dead, failed, dropped, cancelled -> queued
    CANCEL = "cancel"  # waiting -> cancelled; running -> asked to stop
    DELETE = "delete"  # any state but running -> gone


class Verdict(StrEnum):
    DONE = "done"  # applied now (for purge and delete: the job is gone, also when it already was)
    ALREADY = "already"  # applied by an earlier run of this batch (same stamp)
    REFUSED = "refused"  # the job moved on: the action no longer applies to it
    FAILED = "failed"  # Redis answered with an error


@dataclass(frozen=True, slots=True)
class BatchItem:
    job_id: str
    queue: str
    expected_attempts: int | None = None  # RESUBMIT: the attempt count of the death the operator saw
    run_at_ms: int | None = None  # RESUBMIT: wait in the scheduled set until then (Redis time, ms)


@dataclass(frozen=True, slots=True)
class ItemResult:
    job_id: str
    verdict: Verdict
    why: str = ""  # for REFUSED and FAILED: what the job is now, or the error


def apply_batch(
    client: Client,
    action: BatchAction,
    items: Sequence[BatchItem],
    *,
    stamp: str,
    reset_attempts: bool = False,
) -> list[ItemResult]:
    """Apply `action` to every item in one round trip; one result per item, in order. Raises only what the
    connection raises (nothing is known then: run the batch again with the same stamp)."""
    if not items:
        return []
    store = client.store
    queues = list(dict.fromkeys(item.queue for item in items))
    # A job a fast enqueue accepted may still be an intake entry: drain first (the calls run in order).
    calls: list[Call[Any]] = [store.drain_call(queue) for queue in queues]
    for item in items:
        if action is BatchAction.RESUBMIT:
            resubmit = store.edit_call(
                item.queue, item.job_id, expected_state="dead", expected_attempts=item.expected_attempts,
                run_at_ms=item.run_at_ms, resubmit=True, reset_attempts=reset_attempts, stamp=stamp,
            )  # fmt: skip
            calls.append(resubmit)
        elif action is BatchAction.PURGE:
            calls.append(store.delete_call(item.queue, item.job_id, expected_state="dead"))
        elif action is BatchAction.RETRY:
            calls.append(store.requeue_call(item.queue, item.job_id, reset_attempts=reset_attempts, stamp=stamp))
        elif action is BatchAction.CANCEL:
            calls.append(store.cancel_call(item.queue, item.job_id, ttl_ms=client.finished_ttl_ms, stamp=stamp))
        else:
            calls.append(store.delete_call(item.queue, item.job_id))
    replies = store.run_many(calls)[len(queues) :]
    return [_verdict(action, item.job_id, reply) for item, reply in zip(items, replies, strict=True)]


def _verdict(action: BatchAction, job_id: str, reply: Any) -> ItemResult:
    if isinstance(reply, Exception):
        return ItemResult(job_id, Verdict.FAILED, str(reply) or type(reply).__name__)
    if action is BatchAction.RESUBMIT:
        status, state = reply
        if status == "resubmitted":
            return ItemResult(job_id, Verdict.DONE)
        if status == "conflict" and state == "dead":
            return ItemResult(job_id, Verdict.REFUSED, "it died again since (attempt count changed)")
        return _common(job_id, status if status != "conflict" else f"is:{state}")
    if reply in ("deleted", "queued", "cancelled", "requested"):
        return ItemResult(job_id, Verdict.DONE)
    if reply == "missing" and action in (BatchAction.PURGE, BatchAction.DELETE):
        return ItemResult(job_id, Verdict.DONE)  # gone is what was asked
    return _common(job_id, str(reply))


def _common(job_id: str, status: str) -> ItemResult:
    if status == "already":
        return ItemResult(job_id, Verdict.ALREADY)
    if status == "missing":
        return ItemResult(job_id, Verdict.REFUSED, "it is no longer in Redis")
    if status == "duplicate":
        return ItemResult(job_id, Verdict.REFUSED, "its unique key is held by another live job")
    if status == "is:cancelling":
        return ItemResult(job_id, Verdict.REFUSED, "it is already being cancelled")
    if status.startswith("is:"):
        return ItemResult(job_id, Verdict.REFUSED, f"it is {status.removeprefix('is:')}")
    return ItemResult(job_id, Verdict.FAILED, f"unexpected reply {status!r}")
