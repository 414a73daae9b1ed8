"""The work of a bulk operation, run by the system task `jobconsole.bulk` on a worker (jobconsole/tasks.py).

The frozen chunks are processed in order. A chunk is marked `started` (its run counted) before its Redis step:
the first one of a run when the run begins, every later one in the commit of the chunk before it. Then:

1. the Redis step: one pipelined round trip of per-job scripts, each carrying the operation's stamp
   (core/batch.py);
2. one transaction: the chunk `done` with its counts (only if it is not done yet), its counts added to the
   operation, the database side of the action (dead letters marked resubmitted by the operator, purged or
   deleted jobs' rows removed), and the next chunk marked `started`. One write transaction per chunk: the
   database's write lock is shared with the mirror.

A worker killed anywhere leaves the chunk `started` or `done`, never counted twice: the engine's recoverer
requeues the system job when its lease runs out and the next attempt starts again at the first chunk not done.
That chunk's Redis step may have run: it is run again (its run count above 1 counts it in `redone`), and the
jobs it changed answer ALREADY (their hash carries the stamp) and count as done, not refused; purged or deleted
jobs answer "missing", which for those actions is done too. Two runners on one operation (a lease lost while its
holder still ran) change nothing twice either: the stamps hold in Redis, and only the one whose commit finds the
chunk not yet done counts it. Between chunks the runner heartbeats its progress and a checkpoint, and honours a
cancel request.
"""

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import close_old_connections, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from jobconsole.bulk.kinds import Kind, KindSpec, kind_spec
from jobconsole.core import JobContext
from jobconsole.core.batch import BatchItem, ItemResult, Verdict, apply_batch
from jobconsole.db_connections import CONNECTION_ERRORS, recover
from jobconsole.engine import get_client
from jobconsole.models import AuditLog, BulkChunk, BulkOperation, DeadLetter, Job

log = logging.getLogger(__name__)

SAMPLE_PER_CHUNK = 10
PROGRESS_FIELDS = ["done", "refused", "failed", "chunks_done", "cancel_requested", "status"]
SUMMARY_SAMPLE = 20
RECONNECTS = 5  # runs started again after a dropped database connection (waits 0.2 s, doubling: 6 s in all)
RECONNECT_WAIT_S = 0.2
Status = BulkOperation.Status

# Called after a chunk's Redis step, before its commit (tests stop a worker exactly there).
after_redis_step: Callable[[BulkChunk], None] | None = None


@dataclass
class Tally:
    """A chunk's results, as its row records them."""

    done: list[str] = field(default_factory=list)  # changed now, or by an earlier run (ALREADY)
    refused: int = 0
    failed: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    sample: list[list[str]] = field(default_factory=list)

    def add(self, result: ItemResult) -> None:
        if result.verdict in (Verdict.DONE, Verdict.ALREADY):
            self.done.append(result.job_id)
            return
        if result.verdict is Verdict.REFUSED:
            self.refused += 1
        else:
            self.failed += 1
        why = result.why if result.verdict is Verdict.REFUSED else f"error: {result.why}"
        self.reasons[why] += 1
        if len(self.sample) < SAMPLE_PER_CHUNK:
            self.sample.append([result.job_id, why])


def run_operation(operation_id: int, context: JobContext | None = None) -> dict[str, Any]:
    """Process the operation's chunks not yet done; returns its counts. Safe to call again at any point: a dropped
    database connection (a restart, a failover) is replaced and the run starts again at the first chunk not done,
    a few times, before the error is left to the system task's retries."""
    reconnects = 0
    while True:
        try:
            return _run(operation_id, context)
        except CONNECTION_ERRORS as exc:
            if reconnects == RECONNECTS or not recover(f"bulk operation {operation_id}", exc):
                raise
            time.sleep(RECONNECT_WAIT_S * 2**reconnects)
            reconnects += 1


def _run(operation_id: int, context: JobContext | None) -> dict[str, Any]:
    close_old_connections()  # a long-lived worker thread: drop a connection the database closed meanwhile
    operation = BulkOperation.objects.filter(pk=operation_id).first()
    if operation is None:
        return {"operation": operation_id, "status": "missing"}
    started = BulkOperation.objects.filter(pk=operation_id, status__in=[Status.PENDING, Status.RUNNING]).update(
        status=Status.RUNNING, started_at=Coalesce(F("started_at"), Value(timezone.now()))
    )
    if not started:  # cancelled while it waited, or finished by another run
        return _counts(operation)
    spec = kind_spec(operation.kind)
    client = get_client()
    spread = int(operation.options.get("spread_seconds") or 0)
    if spread and operation.spread_start_ms is None:
        # Redis's clock opens the window (every deadline is in it), once: a resumed run keeps the same slots.
        BulkOperation.objects.filter(pk=operation_id, spread_start_ms__isnull=True).update(
            spread_start_ms=client.store.time_ms()
        )
    operation.refresh_from_db()
    todo = list(
        operation.chunk_rows.exclude(status=BulkChunk.Status.DONE).order_by("index").values_list("pk", flat=True)
    )
    if todo:  # the first chunk's run begins (each later one's is marked in the commit of the one before)
        # Not if a run beside this one (its lease lapsed on a loaded machine) counted it meanwhile: done stays done.
        BulkChunk.objects.filter(pk=todo[0]).exclude(status=BulkChunk.Status.DONE).update(
            status=BulkChunk.Status.STARTED, runs=F("runs") + 1
        )
    for n, chunk_pk in enumerate(todo):
        if operation.cancel_requested or (context is not None and context.cancel_requested):
            return _finish(operation, Status.CANCELLED)
        _process_chunk(operation, spec, chunk_pk, client, todo[n + 1] if n + 1 < len(todo) else None)
        operation.refresh_from_db(fields=PROGRESS_FIELDS)
        if context is not None:
            processed = operation.done + operation.refused + operation.failed
            context.heartbeat(
                progress=processed / operation.total if operation.total else 1.0,
                checkpoint={"chunks_done": operation.chunks_done, "processed": processed},
            )
    if operation.cancel_requested and operation.chunks_done < operation.chunks:
        return _finish(operation, Status.CANCELLED)
    return _finish(operation, Status.DONE)


def _process_chunk(operation: BulkOperation, spec: KindSpec, chunk_pk: int, client: Any, next_pk: int | None) -> None:
    """One chunk: its Redis step, then one commit that counts it (once) and marks the next one started."""
    chunk = BulkChunk.objects.get(pk=chunk_pk)
    if chunk.status == BulkChunk.Status.DONE:
        return
    items = _batch_items(operation, spec, chunk)
    results = apply_batch(
        client, spec.action, items, stamp=operation.stamp,
        reset_attempts=bool(operation.options.get("reset_attempts")),
    )  # fmt: skip
    if after_redis_step is not None:
        after_redis_step(chunk)
    tally = Tally()
    for result in results:
        tally.add(result)
    now = timezone.now()
    with transaction.atomic():
        # One write transaction per chunk: the database's write lock is shared with the mirror.
        counts = {"done": len(tally.done), "refused": tally.refused, "failed": tally.failed}
        refusals = {"reasons": dict(tally.reasons), "sample": tally.sample}
        unfinished = BulkChunk.objects.filter(pk=chunk_pk).exclude(status=BulkChunk.Status.DONE)
        marked = unfinished.update(status=BulkChunk.Status.DONE, refusals=refusals, finished_at=now, **counts)
        if not marked:  # another run of this operation counted it first
            return
        # Read under the row's write lock, after any run beside this one marked it: a chunk started more than once
        # may have had its Redis step run already, and is counted in `redone` once, by the run that counts it.
        redo = BulkChunk.objects.filter(pk=chunk_pk).values_list("runs", flat=True).get() > 1
        BulkOperation.objects.filter(pk=operation.pk).update(
            done=F("done") + len(tally.done), refused=F("refused") + tally.refused,
            failed=F("failed") + tally.failed, chunks_done=F("chunks_done") + 1, redone=F("redone") + int(redo),
            progressed_at=now,
        )  # fmt: skip
        _database_side(operation, spec, chunk, set(tally.done))
        if next_pk is not None:
            BulkChunk.objects.filter(pk=next_pk).exclude(status=BulkChunk.Status.DONE).update(
                status=BulkChunk.Status.STARTED, runs=F("runs") + 1
            )


def _batch_items(operation: BulkOperation, spec: KindSpec, chunk: BulkChunk) -> list[BatchItem]:
    if spec.kind != Kind.RESUBMIT_DEADLETTERS:
        return [BatchItem(item[0], item[1]) for item in chunk.items]
    spread_ms = int(operation.options.get("spread_seconds") or 0) * 1000
    start, total = operation.spread_start_ms or 0, max(1, operation.total)
    out: list[BatchItem] = []
    for position, (job_id, queue, _pk, attempts) in enumerate(chunk.items, start=chunk.first):
        # Evenly over the window, by position in the frozen set: a chunk run again gets the same times.
        run_at = start + spread_ms * position // total if spread_ms else None
        out.append(BatchItem(job_id, queue, expected_attempts=attempts, run_at_ms=run_at))
    return out


def _database_side(operation: BulkOperation, spec: KindSpec, chunk: BulkChunk, done: set[str]) -> None:
    """What the action means for the mirror's rows, in the chunk's transaction (the mirror agrees later)."""
    if not done:
        return
    if spec.kind == Kind.RESUBMIT_DEADLETTERS:
        letters = [item[2] for item in chunk.items if item[0] in done]
        DeadLetter.objects.filter(pk__in=letters, resubmitted_by="").update(
            resubmitted_at=Coalesce(F("resubmitted_at"), Value(timezone.now())), resubmitted_by=operation.actor
        )
    elif spec.kind in (Kind.PURGE_DEADLETTERS, Kind.DELETE_JOBS):
        Job.objects.filter(id__in=list(done)).delete()


def _finish(operation: BulkOperation, status: str) -> dict[str, Any]:
    summary = summarize(operation)
    with transaction.atomic():
        finished = BulkOperation.objects.filter(pk=operation.pk, status=Status.RUNNING).update(
            status=status, finished_at=timezone.now(), summary=summary
        )
        operation.refresh_from_db()
        if finished and operation.audit_id:
            _close_audit(operation)
    log.info(
        "bulk operation=%s kind=%s %s: done=%d refused=%d failed=%d of %d (chunks redone=%d)",
        operation.pk, operation.kind, operation.status, operation.done, operation.refused, operation.failed,
        operation.total, operation.redone,
    )  # fmt: skip
    return _counts(operation)


def mark_failed(operation_id: int, error: BaseException) -> None:
    """The system job gave up (its last attempt failed): the operation stops where it is, resumable."""
    operation = BulkOperation.objects.filter(pk=operation_id).first()
    if operation is None:
        return
    summary = {**summarize(operation), "error": f"{type(error).__name__}: {error}"[:2000]}
    with transaction.atomic():
        failed = BulkOperation.objects.filter(pk=operation_id, status__in=[Status.PENDING, Status.RUNNING]).update(
            status=Status.FAILED, finished_at=timezone.now(), summary=summary
        )
        operation.refresh_from_db()
        if failed and operation.audit_id:
            _close_audit(operation)


def summarize(operation: BulkOperation) -> dict[str, Any]:
    """Refusals and errors over the finished chunks: counted by reason, with a sample of jobs."""
    reasons: Counter[str] = Counter()
    sample: list[list[str]] = []
    rows = operation.chunk_rows.filter(status=BulkChunk.Status.DONE).exclude(refused=0, failed=0)
    for refusals in rows.order_by("index").values_list("refusals", flat=True).iterator():
        reasons.update(refusals.get("reasons", {}))
        sample.extend(refusals.get("sample", [])[: max(0, SUMMARY_SAMPLE - len(sample))])
    return {"reasons": dict(reasons.most_common()), "sample": sample}


def _close_audit(operation: BulkOperation) -> None:
    if operation.audit_id is None:
        return
    record = AuditLog.objects.filter(pk=operation.audit_id).first()
    if record is None:
        return
    record.count = operation.done
    record.refused = operation.refused + operation.failed
    record.detail = {**record.detail, "status": operation.status, "total": operation.total,
                     "refused": operation.refused, "failed": operation.failed}  # fmt: skip
    record.save(update_fields=["count", "refused", "detail"])


def _counts(operation: BulkOperation) -> dict[str, Any]:
    operation.refresh_from_db()
    return {
        "operation": operation.pk, "status": operation.status, "total": operation.total, "done": operation.done,
        "refused": operation.refused, "failed": operation.failed, "redone": operation.redone,
    }  # fmt: skip
