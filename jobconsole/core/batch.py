"""One operator action applied to many jobs in one pipelined round trip: the step a bulk operation repeats
for each chunk of its frozen set of jobs.

Every job goes through an atomic script with the compare-and-set of an operator's single action (a resubmit
applies only to a job still dead, with the attempt count the operator saw; a purge deletes only a job still
dead): the script of that single action (requeue, cancel, delete), or for resubmits, which a bulk operation may
count in hundreds of thousands, resubmit.lua, many jobs per call. Each carries a stamp: the bulk operation's id,
recorded in the job hash by the step that applies the change. Running the same batch again with the same stamp
changes nothing and answers ALREADY for every job the first run changed, so a chunk interrupted between its Redis
step and its bookkeeping is simply run again.
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


RESUBMIT_PER_CALL = 100  # jobs per resubmit script: Redis runs nothing else meanwhile, so keep each one short


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
    if action is BatchAction.RESUBMIT:
        return _resubmit(client, items, stamp=stamp, reset_attempts=reset_attempts)
    calls: list[Call[Any]] = []
    if action is not BatchAction.PURGE:  # a dead job is never an intake entry; a waiting one may still be
        calls += [store.drain_call(queue) for queue in dict.fromkeys(item.queue for item in items)]
    drains = len(calls)
    for item in items:
        if action is BatchAction.PURGE:
            calls.append(store.delete_call(item.queue, item.job_id, expected_state="dead"))
        elif action is BatchAction.RETRY:
            calls.append(store.requeue_call(item.queue, item.job_id, reset_attempts=reset_attempts, stamp=stamp))
        elif action is BatchAction.CANCEL:
            calls.append(store.cancel_call(item.queue, item.job_id, ttl_ms=client.finished_ttl_ms, stamp=stamp))
        else:
            calls.append(store.delete_call(item.queue, item.job_id))
    replies = store.run_many(calls)[drains:]
    return [_verdict(action, item.job_id, reply) for item, reply in zip(items, replies, strict=True)]


def _resubmit(client: Client, items: Sequence[BatchItem], *, stamp: str, reset_attempts: bool) -> list[ItemResult]:
    """Resubmits go many jobs to a script call (lua/resubmit.lua), per queue, all calls in one round trip."""
    by_queue: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        by_queue.setdefault(item.queue, []).append(index)
    calls: list[Call[list[str]]] = []
    groups: list[list[int]] = []
    for queue, indexes in by_queue.items():
        for start in range(0, len(indexes), RESUBMIT_PER_CALL):
            group = indexes[start : start + RESUBMIT_PER_CALL]
            jobs = [(items[i].job_id, items[i].expected_attempts, items[i].run_at_ms) for i in group]
            calls.append(client.store.resubmit_call(queue, jobs, stamp=stamp, reset_attempts=reset_attempts))
            groups.append(group)
    results: list[ItemResult | None] = [None] * len(items)
    for group, reply in zip(groups, client.store.run_many(calls), strict=True):
        for position, i in enumerate(group):
            status = reply if isinstance(reply, Exception) else reply[position]
            results[i] = _verdict(BatchAction.RESUBMIT, items[i].job_id, status)
    return [r for r in results if r is not None]


def _verdict(action: BatchAction, job_id: str, reply: Any) -> ItemResult:
    if isinstance(reply, Exception):
        return ItemResult(job_id, Verdict.FAILED, str(reply) or type(reply).__name__)
    if action is BatchAction.RESUBMIT:
        if reply in ("queued", "scheduled"):
            return ItemResult(job_id, Verdict.DONE)
        if reply == "conflict:dead":
            return ItemResult(job_id, Verdict.REFUSED, "it died again since (attempt count changed)")
        return _common(job_id, str(reply).replace("conflict:", "is:", 1))
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
