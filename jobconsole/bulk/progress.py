"""How far a bulk operation got, for the console's progress bar (one row read, no counting)."""

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from jobconsole.models import BulkOperation

STALLED_AFTER_S = 60.0  # running, with no chunk finished for this long: its system job may be lost


@dataclass(frozen=True)
class Progress:
    operation: int
    kind: str
    status: str
    total: int
    done: int
    refused: int
    failed: int
    chunks: int
    chunks_done: int
    cancel_requested: bool
    started_at: datetime | None
    finished_at: datetime | None
    rate: float | None  # jobs per second since it started
    seconds_left: float | None  # at that rate; None before the first chunk and once finished
    elapsed: float | None  # seconds from start to now (or to the end)
    stalled: bool  # running, but nothing finished for STALLED_AFTER_S

    @property
    def processed(self) -> int:
        return self.done + self.refused + self.failed

    @property
    def fraction(self) -> float:
        return self.processed / self.total if self.total else 1.0

    @property
    def percent(self) -> int:
        return int(self.fraction * 100)

    @property
    def is_finished(self) -> bool:
        return self.status in (BulkOperation.Status.DONE, BulkOperation.Status.CANCELLED, BulkOperation.Status.FAILED)

    def as_dict(self) -> dict[str, object]:
        return {
            "operation": self.operation, "kind": self.kind, "status": self.status, "total": self.total,
            "done": self.done, "refused": self.refused, "failed": self.failed, "processed": self.processed,
            "chunks": self.chunks, "chunks_done": self.chunks_done, "cancel_requested": self.cancel_requested,
            "rate": self.rate, "seconds_left": self.seconds_left, "elapsed": self.elapsed, "stalled": self.stalled,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
        }  # fmt: skip


def progress(operation: int | BulkOperation, now: datetime | None = None) -> Progress:
    """Done, refused, failed, total, rate, time left and status of an operation (by id or row)."""
    op = operation if isinstance(operation, BulkOperation) else BulkOperation.objects.get(pk=operation)
    now = now or timezone.now()
    processed = op.done + op.refused + op.failed
    end = op.finished_at or now
    elapsed = (end - op.started_at).total_seconds() if op.started_at else None
    rate: float | None = None
    seconds_left: float | None = None
    if op.started_at and op.progressed_at and processed:
        # Up to the last finished chunk: between chunks the rate neither dips nor jumps.
        spent = max((op.progressed_at - op.started_at).total_seconds(), 1e-3)
        rate = processed / spent
        if not op.finished_at and op.status == BulkOperation.Status.RUNNING:
            seconds_left = (op.total - processed) / rate
    last = op.progressed_at or op.started_at
    stalled = (
        op.status == BulkOperation.Status.RUNNING
        and last is not None
        and (now - last).total_seconds() > STALLED_AFTER_S
    )
    return Progress(
        operation=op.pk, kind=op.kind, status=op.status, total=op.total, done=op.done, refused=op.refused,
        failed=op.failed, chunks=op.chunks, chunks_done=op.chunks_done, cancel_requested=op.cancel_requested,
        started_at=op.started_at, finished_at=op.finished_at, rate=rate, seconds_left=seconds_left,
        elapsed=elapsed, stalled=stalled,
    )  # fmt: skip
