"""A Celery app's tasks.py; only the import changed."""

from jobconsole.celery import shared_task  # was: from celery import shared_task


@shared_task
def add(x, y):
    return x + y


@shared_task
def xsum(numbers):
    return sum(numbers)


@shared_task
def slow_double(x):
    return 2 * x
