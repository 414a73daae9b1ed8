"""Django `@task` functions and Celery-style tasks for tests/processes/test_django_tasks.py, with receivers of
Django's task signals. A worker subprocess imports it (JOBCONSOLE_TASK_MODULES); what the worker's receivers see
is appended to the file named by DJANGO_TASKS_LEDGER, so the test reads it from outside."""

from __future__ import annotations  # django.tasks' Task and TaskResult are generic only in the stubs

import os
from typing import Any

from django.dispatch import receiver
from django.tasks import TaskContext, TaskResult, task
from django.tasks.signals import task_finished, task_started

from jobconsole.celery import Celery, shared_task
from tests.tasks import _append

LEDGER_VARIABLE = "DJANGO_TASKS_LEDGER"


def _ledger(line: str) -> None:
    if path := os.environ.get(LEDGER_VARIABLE):
        _append(path, line)


@task
def add(x: int, y: int) -> int:
    return x + y


@task
def explode(message: str) -> None:
    raise ValueError(message)


@task(takes_context=True)
def introspect(context: TaskContext, tag: str, *, repeat: int = 1) -> dict[str, Any]:
    result = context.task_result
    return {"tag": tag * repeat, "id": result.id, "attempt": context.attempt, "worker_ids": result.worker_ids}


@task
def mark(label: str) -> str:
    """Records the order jobs ran in."""
    _ledger(f"ran {label}")
    return label


@task
async def add_async(x: int, y: int) -> int:
    return x + y


@receiver(task_started)
def _started(sender: type, task_result: TaskResult[..., Any], **kwargs: Any) -> None:
    _ledger(f"started {task_result.id} {task_result.status} {task_result.task.module_path} {os.getpid()}")


@receiver(task_finished)
def _finished(sender: type, task_result: TaskResult[..., Any], **kwargs: Any) -> None:
    _ledger(f"finished {task_result.id} {task_result.status} {len(task_result.errors)} {os.getpid()}")


# Celery style: what a Celery user's tasks.py looks like after changing its import.


@shared_task
def multiply(x: int, y: int) -> int:
    return x * y


@shared_task(bind=True, max_retries=2, default_retry_delay=0)
def flaky(self: Any, succeed_on: int) -> dict[str, Any]:
    """Retries itself until its attempt `succeed_on` (1 = the first)."""
    if self.request.retries + 1 < succeed_on:
        raise self.retry(countdown=0.1)
    return {"retries": self.request.retries, "id": self.request.id}


@shared_task(autoretry_for=(KeyError,), max_retries=1, default_retry_delay=0)
def broken(key: str) -> None:
    raise KeyError(key)


app = Celery("tests")


@app.task(queue="celery-other", priority=5)
def tagged(label: str) -> str:
    _ledger(f"ran {label}")
    return label
