"""A Celery user's tasks module moved to Jobconsole: only the imports changed (`from celery import shared_task`
became `from jobconsole.celery import shared_task`). `make typecheck` runs mypy over it: the calls are typed as
Celery's are (the celery-types stubs), so `add.delay("2", 3)` or `add.apply_async((2, 3), countdown="soon")`
would be type errors (tests/app/test_celery_typing.py checks that they are)."""

import urllib.request
from datetime import UTC, datetime, timedelta

from jobconsole.celery import AsyncResult, CeleryTask, shared_task


@shared_task
def add(x: int, y: int) -> int:
    return x + y


@shared_task(bind=True, max_retries=5, default_retry_delay=10)
def fetch_status(self: CeleryTask[[str], int], url: str) -> int:
    """Retries itself on a connection error, 30 s later, at most five times."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except ConnectionError as exc:
        raise self.retry(exc=exc, countdown=30) from exc


@shared_task(queue="reports", autoretry_for=(TimeoutError,), retry_backoff=True, time_limit=300)
def build_report(day: str, *, fmt: str = "pdf") -> dict[str, str]:
    return {"day": day, "format": fmt}


def send_work() -> list[AsyncResult[int] | AsyncResult[dict[str, str]]]:
    """The calls a producer makes, each as in Celery."""
    now = add.delay(2, 3)
    later = add.apply_async((2, 3), countdown=10, priority=0)  # priority 0..9, 0 first (Redis's convention)
    report = build_report.apply_async(
        args=("2026-11-26",), kwargs={"fmt": "csv"}, eta=datetime.now(UTC) + timedelta(hours=1), queue="reports"
    )
    status = fetch_status.delay("https://example.com/health")
    total: int = now.get(timeout=10)  # the task's return type
    assert total == 5 and status.id
    return [now, later, report]
