"""Transactional enqueue: a job recorded in the application's own transaction, published after commit.

    with transaction.atomic():
        order = Order.objects.create(...)
        outbox.enqueue("send_email", {"to": order.email})

Both the order and the job exist, or neither: the job is an `OutboxEntry` row written in the same
transaction, published to Redis by an on-commit hook. If the process dies between the commit and the
publish, the relay (a chore of the mirror's leader, see mirror/service.py, or `manage.py relayoutbox`)
publishes it later. Job ids are fixed in the outbox row before publishing and enqueueing an existing id is
a no-op in Redis (status 'exists'), so publishing an entry twice never makes two jobs; and an entry whose
job the mirror already recorded is only marked published, never re-sent, so even a job Redis has since
forgotten is not redone.
"""

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from django.db import transaction

from jobconsole.conf import outbox_config
from jobconsole.core import JobQueueError, JobSpec, RedisFull
from jobconsole.core.ids import new_job_id
from jobconsole.core.timing import parse_run_at
from jobconsole.engine import get_client
from jobconsole.models import Job, OutboxEntry

log = logging.getLogger(__name__)


def enqueue(task: str, params: dict[str, Any] | None = None, *, using: str | None = None, **options: Any) -> str:
    """Record a job to be enqueued when the current transaction commits; returns its id at once.

    Options are those of `Client.enqueue` (queue, priority, delay, run_at, max_retries, unique_key, group, id).
    The job is validated now, so a bad job raises InvalidJob inside the caller's transaction. A delay
    counts from now, not from the publish."""
    spec = JobSpec(task=task, params=params, **options)
    if spec.delay is not None and spec.run_at is not None:
        get_client().check(spec)  # raises the engine's own InvalidJob message
    run_at, delay = spec.run_at, spec.delay
    if run_at is not None and not isinstance(run_at, datetime):  # ISO text, or Runqueue's [n, unit]: from now
        timing = parse_run_at(run_at)
        run_at, delay = timing.run_at, timing.delay
    if delay is not None:
        run_at = datetime.now(UTC) + timedelta(seconds=float(delay))
    spec = replace(spec, id=spec.id or new_job_id(), delay=None, run_at=run_at)
    queue = get_client().check(spec)  # the engine's validation, unchanged (raises InvalidJob)
    assert spec.id is not None
    OutboxEntry.objects.using(using).create(id=spec.id, task=task, queue=queue, spec=_to_json(spec))
    job_id = spec.id
    transaction.on_commit(lambda: publish([job_id], using=using), using=using, robust=True)
    return job_id


def publish(ids: Sequence[str], *, using: str | None = None) -> int:
    """Send these unpublished entries to Redis and mark them published; returns how many were sent.
    Safe to call twice for the same entry (the second enqueue finds the id and does nothing)."""
    entries = list(OutboxEntry.objects.using(using).filter(id__in=list(ids), published_at__isnull=True))
    if not entries:
        return 0
    error: Exception | None = None
    try:
        results = get_client().enqueue_many([_from_json(e.spec) for e in entries])
        sent, unsent = entries, []
    except RedisFull as full:  # the jobs Redis took before it filled up are published; the rest wait
        error, results = full, full.accepted
        refused = set(full.refused)
        sent, unsent = [e for e in entries if e.id not in refused], [e for e in entries if e.id in refused]
    except (JobQueueError, redis.RedisError) as exc:
        error, results, sent, unsent = exc, [], [], entries
    now = datetime.now(UTC)
    for e, r in zip(sent, results, strict=True):  # in order; r.id is another job's for a held unique key
        e.published_at, e.status, e.tries = now, r.status, e.tries + 1
    OutboxEntry.objects.using(using).bulk_update(sent, ["published_at", "status", "tries"])
    if error is not None:
        log.warning("outbox publish failed entries=%d error=%s; the relay will retry", len(unsent), error)
        for e in unsent:
            e.tries += 1
            e.last_error = str(error)[:2000]
        OutboxEntry.objects.using(using).bulk_update(unsent, ["tries", "last_error"])
    return len(sent)


def relay(*, limit: int = 1000, older_than: float | None = None, using: str | None = None) -> int:
    """Publish entries left unpublished (their process died after commit); returns how many were sent."""
    wait = outbox_config()["RELAY_AFTER"] if older_than is None else older_than
    cutoff = datetime.now(UTC) - timedelta(seconds=wait)
    ids = list(
        OutboxEntry.objects.using(using)
        .filter(published_at__isnull=True, created_at__lte=cutoff)
        .order_by("created_at")
        .values_list("id", flat=True)[:limit]
    )
    if not ids:
        return 0
    # Published but never marked: the mirror has seen the job. Do not send it again (Redis may have
    # dropped it after it finished, and a new enqueue would run it twice).
    known = set(Job.objects.using(using).filter(id__in=ids).values_list("id", flat=True))
    if known:
        OutboxEntry.objects.using(using).filter(id__in=known, published_at__isnull=True).update(
            published_at=datetime.now(UTC), status="exists"
        )
    sent = publish([i for i in ids if i not in known], using=using)
    if sent:
        log.info("outbox relay published=%d", sent)
    return sent


def prune(*, using: str | None = None) -> int:
    keep = timedelta(seconds=float(outbox_config()["KEEP_PUBLISHED"]))
    deleted, _ = OutboxEntry.objects.using(using).filter(published_at__lt=datetime.now(UTC) - keep).delete()
    return deleted


def _to_json(spec: JobSpec) -> dict[str, Any]:
    return {
        "task": spec.task,
        "params": spec.params,
        "id": spec.id,
        "queue": spec.queue,
        "priority": spec.priority,
        "run_at": spec.run_at.isoformat() if isinstance(spec.run_at, datetime) else None,
        "max_retries": spec.max_retries,
        "unique_key": spec.unique_key,
        "group": spec.group,
        "unique_until": spec.unique_until,
    }


def _from_json(data: dict[str, Any]) -> JobSpec:
    run_at = datetime.fromisoformat(data["run_at"]) if data.get("run_at") else None
    return JobSpec(
        task=data["task"],
        params=data.get("params"),
        id=data["id"],
        queue=data.get("queue"),
        priority=data.get("priority"),
        run_at=run_at,
        max_retries=data.get("max_retries"),
        unique_key=data.get("unique_key"),
        group=data.get("group"),
        unique_until=data.get("unique_until"),
    )
