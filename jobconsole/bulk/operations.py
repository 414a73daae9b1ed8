"""Preview, confirm, cancel and resume bulk operations (the request side; runner.py does the work).

1. `preview(kind, selection)` counts what the operation would act on and shows a sample, changing nothing.
   It returns a signed confirmation naming the kind, the selection and a watermark: the time of the preview
   and the newest dead letter then.
2. `confirm(token, ...)` freezes the ids: the rows the selection still matches, bounded by the watermark (a dead
   letter recorded after the preview, a job whose row changed after it, is left out), in chunks of
   BULK.CHUNK. In one transaction it records the operation, its chunks, an audit record and the system job
   (through the outbox, so it is published even if this process dies right after the commit). It returns at
   once; the same confirmation twice gives the same operation.
3. `request_cancel` stops an operation between two chunks; `resume` enqueues its system job again (after it
   failed for good, or was lost): it goes on from the first chunk not done.
"""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core import signing
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, connections, transaction
from django.db.models import Max, Q, QuerySet
from django.utils import timezone

from jobconsole import audit, outbox
from jobconsole.bulk.kinds import Kind, KindSpec, kind_spec
from jobconsole.bulk.selection import Selection, SelectionError, matching
from jobconsole.bulk.system import BULK_TASK, unique_key
from jobconsole.conf import bulk_config
from jobconsole.core.ids import new_job_id
from jobconsole.core.states import CANCELLABLE_STATES, REQUEUEABLE_STATES, JobState
from jobconsole.models import BulkChunk, BulkOperation, DeadLetter

SAMPLE = 20
SALT = "jobconsole.bulk.confirmation"
MAX_SPREAD_SECONDS = 7 * 86_400
AUDIT_IDS = 1_000  # an explicit selection up to this size is listed in the audit record itself
RETRYABLE = [s.value for s in JobState if s in REQUEUEABLE_STATES]
CANCELLABLE = [s.value for s in JobState if s in CANCELLABLE_STATES]

# request.user: a User or an AnonymousUser (django-stubs types it as neither); or the name of a caller that is no
# Django user (an API token, "api:<name>"), whose scope the HTTP API checked instead of the admin's permissions.
type User = Any


def _permitted(spec: KindSpec, user: User) -> None:
    if not isinstance(user, str) and not spec.allowed(user):
        raise PermissionDenied(f"You may not {spec.label.lower()}.")


def _actor(user: User) -> str:
    return user if isinstance(user, str) else user.get_username() or "anonymous"


class ConfirmError(ValueError):
    """The confirmation cannot be carried out; the message says why and what to do."""


@dataclass(frozen=True)
class Watermark:
    """What existed when the operator looked: later arrivals are never part of the operation."""

    as_of: datetime
    max_letter: int  # the highest DeadLetter pk then (rows are only ever added)

    @classmethod
    def now(cls) -> "Watermark":
        return cls(timezone.now(), DeadLetter.objects.aggregate(m=Max("pk"))["m"] or 0)

    def bound(self, target: str, rows: "QuerySet[Any]") -> "QuerySet[Any]":
        if target == "deadletter":
            return rows.filter(pk__lte=self.max_letter)
        return rows.filter(Q(synced_at__lte=self.as_of) | Q(synced_at__isnull=True))


@dataclass(frozen=True)
class Preview:
    spec: KindSpec
    selection: Selection
    matched: int  # rows the selection matches
    count: int  # jobs the operation would act on
    sample: list[Any]  # DeadLetter or Job rows, at most SAMPLE
    watermark: Watermark
    token: str  # the signed confirmation

    @property
    def left_out(self) -> int:
        return max(0, self.matched - self.count)


def eligible(spec: KindSpec, rows: "QuerySet[Any]") -> "QuerySet[Any]":
    """The rows the operation can act on: a resubmit takes the dead letters not resubmitted yet; a retry or cancel,
    jobs Redis still holds in a state that allows it; a delete, anything not running. (A dead letter whose job Redis
    no longer holds is refused when its chunk runs, with that reason: telling them apart here would cost a join.)"""
    if spec.kind == Kind.RESUBMIT_DEADLETTERS:
        return rows.filter(resubmitted_at__isnull=True)
    if spec.kind == Kind.RETRY_JOBS:
        return rows.filter(in_redis=True, state__in=RETRYABLE)
    if spec.kind == Kind.CANCEL_JOBS:
        return rows.filter(in_redis=True, state__in=CANCELLABLE)
    if spec.kind == Kind.DELETE_JOBS:
        return rows.exclude(state=JobState.RUNNING.value)
    return rows


def _count(spec: KindSpec, selection: Selection, rows: "QuerySet[Any]") -> int:
    """Jobs, not rows: a job may have died more than once. It has one open death at a time, though, so only a purge
    that takes resubmitted dead letters too needs the (slower) distinct count."""
    status = (selection.filter.get("status") or ["open"])[0]
    if spec.kind == Kind.PURGE_DEADLETTERS and (selection.explicit or status != "open"):
        return rows.order_by().values("job_id").distinct().count()
    return rows.count()


def preview(kind: str, selection: Selection, *, sample: int = SAMPLE) -> Preview:
    """How many jobs the operation would act on, and a sample of them. Changes nothing."""
    spec = kind_spec(kind)
    if spec.target != selection.target:
        raise SelectionError(f"{spec.label} acts on {_noun(spec.target)}, not on {_noun(selection.target)}.")
    watermark = Watermark.now()
    rows = watermark.bound(spec.target, matching(selection))
    open_only = spec.kind == Kind.RESUBMIT_DEADLETTERS and (selection.filter.get("status") or ["open"])[0] == "open"
    chosen = rows if open_only and not selection.explicit else eligible(spec, rows)  # the filter says it already
    count = _count(spec, selection, chosen)
    matched = count if chosen is rows else _count(spec, selection, rows)
    rows_sample = _sample(chosen, selection, watermark, sample)
    token = signing.dumps(
        {"k": spec.kind.value, "s": selection.as_dict(), "t": watermark.as_of.isoformat(), "m": watermark.max_letter,
         "n": count},
        salt=SALT, compress=True,
    )  # fmt: skip
    return Preview(spec, selection, matched, count, rows_sample, watermark, token)


def _sample(rows: "QuerySet[Any]", selection: Selection, watermark: Watermark, size: int) -> list[Any]:
    """The newest `size` rows, read the way an index serves them (never a sort of everything the filter matches):
    jobs by enqueue time (every job index ends with it); dead letters by death time where the (queue, died_at) or
    (fingerprint, died_at) index applies, else by their primary key (they are numbered as they are recorded)
    looked for in the newest thousand, ten thousand, ... rows first: a database may otherwise pick an index on
    another column and sort what it found."""
    if selection.target == "job":
        return list(rows.order_by("-enqueued_at", "-pk")[:size])
    if {"queue", "fingerprint"} & selection.filter.keys():
        return list(rows.order_by("-died_at", "-pk")[:size])
    newest = rows.order_by("-pk")
    for window in (1_000, 10_000, 100_000):
        found = list(newest.filter(pk__gt=watermark.max_letter - window)[:size])
        if len(found) == size:
            return found
    return list(newest[:size])


def _noun(target: str) -> str:
    return "dead letters" if target == "deadletter" else "jobs"


def parse_options(spec: KindSpec, data: Mapping[str, Any]) -> dict[str, Any]:
    """The options the kind takes, from form data: reset_attempts (a checkbox), spread_seconds (0 = none)."""
    options: dict[str, Any] = {}
    if "reset_attempts" in spec.options:
        options["reset_attempts"] = str(data.get("reset_attempts", "")).lower() in ("on", "1", "true", "yes")
    if "spread_seconds" in spec.options:
        raw = str(data.get("spread_seconds", "") or "0").strip()
        try:
            spread = int(raw)
        except ValueError:
            raise ConfirmError(f"The spread window {raw!r} is not a whole number of seconds.") from None
        if not 0 <= spread <= MAX_SPREAD_SECONDS:
            raise ConfirmError(f"The spread window must be between 0 and {MAX_SPREAD_SECONDS:,} seconds (7 days).")
        options["spread_seconds"] = spread
    return options


def confirm(token: str, *, user: User, options: Mapping[str, Any], reason: str = "") -> tuple[BulkOperation, bool]:
    """Freeze, record and enqueue the previewed operation; (operation, False) when this confirmation was already
    carried out. Raises ConfirmError (stale or altered confirmation, nothing left to do), PermissionDenied."""
    try:
        data = signing.loads(token, salt=SALT, max_age=timedelta(seconds=bulk_config()["PREVIEW_MAX_AGE"]))
    except signing.SignatureExpired:
        minutes = int(bulk_config()["PREVIEW_MAX_AGE"] // 60)
        raise ConfirmError(
            f"This preview is more than {minutes} minutes old and jobs may have moved on since: preview again, "
            "then confirm."
        ) from None
    except signing.BadSignature:
        raise ConfirmError("This confirmation is not valid (altered, or made elsewhere): preview again.") from None
    spec = kind_spec(data["k"])
    _permitted(spec, user)
    digest = hashlib.sha256(token.encode()).hexdigest()
    existing = BulkOperation.objects.filter(confirmation=digest).first()
    if existing is not None:
        return existing, False
    selection = Selection.from_dict(data["s"])
    watermark = Watermark(datetime.fromisoformat(data["t"]), int(data["m"]))
    chosen = parse_options(spec, options)
    items = frozen_items(spec, eligible(spec, watermark.bound(spec.target, matching(selection))))
    if not items:
        raise ConfirmError(
            f"Nothing left to do: the {data['n']:,} job(s) previewed have all moved on since the preview."
        )
    try:
        operation = _create(
            spec, items, user=user, selection=selection.as_dict(), options=chosen, reason=reason,
            previewed=int(data["n"]), confirmation=digest, listed=selection.ids,
        )  # fmt: skip
    except IntegrityError:  # the same confirmation, carried out concurrently
        return BulkOperation.objects.get(confirmation=digest), False
    return operation, True


def start_from_rows(
    kind: str,
    rows: "QuerySet[Any]",
    *,
    user: User,
    description: dict[str, Any],
    options: Mapping[str, Any] | None = None,
    reason: str = "",
) -> BulkOperation:
    """An operation over rows chosen elsewhere (the admin's selected or filtered rows), frozen now."""
    spec = kind_spec(kind)
    _permitted(spec, user)
    items = frozen_items(spec, eligible(spec, rows))
    if not items:
        raise ConfirmError("Nothing to do: none of the selected rows can take this action.")
    return _create(spec, items, user=user, selection=description, options=dict(options or {}), reason=reason)


def frozen_items(spec: KindSpec, rows: "QuerySet[Any]") -> list[list[Any]]:
    """The jobs to act on, in a fixed order, each once: [job id, queue] for jobs; for dead letters also the dead
    letter's pk and the attempt count of that death (the compare-and-set of a resubmit)."""
    if spec.target == "job":
        return [[job_id, queue] for job_id, queue in _fetch(rows.order_by("id").values_list("id", "queue"))]
    seen: set[str] = set()
    items: list[list[Any]] = []
    for job_id, queue, pk, attempts in _fetch(rows.order_by("pk").values_list("job_id", "queue", "pk", "attempts")):
        if job_id not in seen:
            seen.add(job_id)
            items.append([job_id, queue, pk, attempts])
    return items


def _fetch(rows: "QuerySet[Any]") -> list[tuple[Any, ...]]:
    """A values_list's tuples straight from the cursor: 100,000 of them in a fraction of the ORM's time (these
    columns are plain text and integers, which need no conversion)."""
    sql, params = rows.query.sql_with_params()
    with connections[rows.db].cursor() as cursor:
        cursor.execute(sql, params)
        found: list[tuple[Any, ...]] = cursor.fetchall()
    return found


def _create(
    spec: KindSpec,
    items: list[list[Any]],
    *,
    user: User,
    selection: dict[str, Any],
    options: dict[str, Any],
    reason: str,
    previewed: int | None = None,
    confirmation: str | None = None,
    listed: tuple[str, ...] = (),
) -> BulkOperation:
    size = bulk_config()["CHUNK"]
    authenticated = not isinstance(user, str) and user.is_authenticated
    with transaction.atomic():
        operation = BulkOperation.objects.create(
            kind=spec.kind, user=user if authenticated else None, actor=_actor(user),
            selection=selection, options=options, reason=reason, confirmation=confirmation, stamp=new_job_id(),
            previewed=previewed, total=len(items), chunks=(len(items) + size - 1) // size,
        )  # fmt: skip
        BulkChunk.objects.bulk_create(
            [
                BulkChunk(operation=operation, index=n, first=start, items=items[start : start + size])
                for n, start in enumerate(range(0, len(items), size))
            ],
            batch_size=20,
        )
        operation.audit = audit.record(
            user, spec.audit_action, job_ids=listed if len(listed) <= AUDIT_IDS else (),
            queue=_one_queue(items), filter=selection, count=len(items), reason=reason,
            detail={"operation": operation.pk, "options": options, "previewed": previewed, "status": "pending"},
        )  # fmt: skip
        key = unique_key(operation.stamp)
        operation.job_id = outbox.enqueue(BULK_TASK, {"operation": operation.pk}, unique_key=key)
        operation.save(update_fields=["audit", "job_id"])
    return operation


def _one_queue(items: list[list[Any]]) -> str:
    queues = {item[1] for item in items[:1000]}
    return queues.pop() if len(queues) == 1 and all(item[1] == items[0][1] for item in items) else ""


def request_cancel(operation: BulkOperation, user: User) -> BulkOperation:
    """Stop the operation: at once while it waits, else between two chunks (the chunk under way finishes)."""
    spec = kind_spec(operation.kind)
    _permitted(spec, user)
    actor = _actor(user)
    ops = BulkOperation.objects.filter(pk=operation.pk)
    with transaction.atomic():
        waiting = ops.filter(status=BulkOperation.Status.PENDING).update(
            status=BulkOperation.Status.CANCELLED, cancel_requested=True, cancelled_by=actor,
            finished_at=timezone.now(),
        )  # fmt: skip
        running = 0 if waiting else ops.filter(status=BulkOperation.Status.RUNNING).update(
            cancel_requested=True, cancelled_by=actor
        )  # fmt: skip
        if waiting or running:
            audit.record(user, "bulk_cancel", detail={"operation": operation.pk, "kind": operation.kind})
    operation.refresh_from_db()
    return operation


def resume(operation: BulkOperation, user: User) -> BulkOperation:
    """Enqueue the operation's system job again, to go on from its first chunk not done. For an operation that
    failed for good, or whose system job was lost; while its system job lives, this does nothing."""
    spec = kind_spec(operation.kind)
    _permitted(spec, user)
    if operation.status in (BulkOperation.Status.DONE, BulkOperation.Status.CANCELLED):
        raise ConfirmError(f"This operation is {operation.status}; there is nothing to resume.")
    with transaction.atomic():
        BulkOperation.objects.filter(pk=operation.pk, status=BulkOperation.Status.FAILED).update(
            status=BulkOperation.Status.RUNNING, finished_at=None
        )
        job_id = outbox.enqueue(BULK_TASK, {"operation": operation.pk}, unique_key=unique_key(operation.stamp))
        BulkOperation.objects.filter(pk=operation.pk).update(job_id=job_id)
        audit.record(user, "bulk_resume", detail={"operation": operation.pk, "kind": operation.kind})
    operation.refresh_from_db()
    return operation
