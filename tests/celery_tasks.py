"""Celery-style tasks for the canvas tests (tests/app/test_celery_canvas.py runs them here, eagerly;
tests/processes/test_celery_canvas.py on a worker, which imports this module through JOBCONSOLE_TASK_MODULES)."""

from typing import Any

from jobconsole.celery import shared_task


@shared_task
def add(x: int, y: int) -> int:
    return x + y


@shared_task
def mul(x: int, y: int) -> int:
    return x * y


@shared_task
def xsum(numbers: list[int]) -> int:
    return sum(numbers)


@shared_task
def identity(value: Any) -> Any:
    return value


@shared_task
def fail(*args: Any) -> None:
    raise ValueError(f"failed with {list(args)}")


@shared_task(bind=True, max_retries=2)
def retried(self: Any, succeed_on: int) -> int:
    """Retries itself until its attempt `succeed_on`; returns the attempt it succeeded on."""
    if self.request.retries + 1 < succeed_on:
        raise self.retry(countdown=0)
    return int(self.request.retries + 1)


@shared_task
def on_error(request: Any, exc: BaseException, traceback: str | None) -> str:
    """An errback in Celery's form: the failed task's request, its exception and traceback."""
    return f"{request.id} failed: {exc!r}"
