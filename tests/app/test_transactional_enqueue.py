"""A Django @task or a Celery-style call enqueued inside atomic(): by default enqueued once when the transaction
commits, and never when it rolls back; "outbox" goes through the outbox; "now" enqueues at once (and a
rollback does not take it back); Celery's delay_on_commit / apply_async_on_commit wait for the commit whatever
the setting says."""

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from jobconsole.core import Client, JobState
from jobconsole.models import OutboxEntry
from tests import django_tasks

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]  # real commits and rollbacks


class Rollback(Exception):
    pass


@pytest.fixture
def client(settings: Any, r: Any, redis_url: str) -> Iterator[Client]:
    from jobconsole.engine import get_client

    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": redis_url}
    yield get_client()


def mode(settings: Any, value: str) -> None:
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "IN_TRANSACTION": value}


def waiting(client: Client, queue: str) -> int:
    counts = client.counts(queue)
    return counts.queued + counts.scheduled


def test_by_default_a_django_task_waits_for_the_commit_and_a_rollback_drops_it(client: Client) -> None:
    queue = django_tasks.add.queue_name
    with pytest.raises(Rollback), transaction.atomic():
        django_tasks.add.enqueue(1, 2)
        assert waiting(client, queue) == 0  # not before the commit: a worker would not see the caller's rows
        raise Rollback
    assert waiting(client, queue) == 0

    with transaction.atomic():
        with transaction.atomic():  # a savepoint's end is not the commit
            result = django_tasks.add.enqueue(3, 4)
        assert waiting(client, queue) == 0
    assert waiting(client, queue) == 1
    job = client.get(result.id)  # the id the caller got before the commit
    assert job.state is JobState.QUEUED and job.params == {"args": [3, 4], "kwargs": {}}
    assert django_tasks.add.enqueue(5, 6).id and waiting(client, queue) == 2  # outside a transaction: at once


def test_by_default_celery_style_calls_wait_for_the_commit(client: Client) -> None:
    queue = django_tasks.multiply.queue
    with pytest.raises(Rollback), transaction.atomic():
        django_tasks.multiply.delay(2, 3)
        django_tasks.multiply.apply_async((2, 4), countdown=30)
        django_tasks.multiply.delay_on_commit(2, 5)
        raise Rollback
    assert waiting(client, queue) == 0
    with transaction.atomic():
        result = django_tasks.multiply.delay(3, 3)
        django_tasks.multiply.apply_async_on_commit((3, 4), countdown=30)
        assert waiting(client, queue) == 0
    assert waiting(client, queue) == 2 and client.get(result.id).params == {"args": [3, 3], "kwargs": {}}


def test_now_enqueues_at_once_but_the_on_commit_calls_still_wait(settings: Any, client: Client) -> None:
    mode(settings, "now")
    queue = django_tasks.multiply.queue
    with pytest.raises(Rollback), transaction.atomic():
        django_tasks.add.enqueue(1, 1)
        django_tasks.multiply.delay(1, 1)
        django_tasks.multiply.delay_on_commit(1, 2)
        assert waiting(client, queue) == 1
        raise Rollback
    assert waiting(client, queue) == 1 and waiting(client, django_tasks.add.queue_name) == 1


def test_outbox_writes_the_job_in_the_transaction_and_publishes_it_after_commit(settings: Any, client: Client) -> None:
    mode(settings, "outbox")
    with pytest.raises(Rollback), transaction.atomic():
        django_tasks.add.enqueue(1, 2)
        django_tasks.multiply.delay_on_commit(1, 2)
        assert OutboxEntry.objects.count() == 2
        raise Rollback
    assert OutboxEntry.objects.count() == 0 and waiting(client, django_tasks.add.queue_name) == 0
    with transaction.atomic():
        result = django_tasks.add.enqueue(7, 8)
        django_tasks.multiply.delay(2, 2)
    entry = OutboxEntry.objects.get(id=result.id)
    assert entry.published_at is not None and entry.status == "created"
    assert client.get(result.id).params == {"args": [7, 8], "kwargs": {}}
    assert waiting(client, django_tasks.multiply.queue) == 1


def test_a_bad_call_is_refused_inside_the_transaction_not_at_commit(client: Client) -> None:
    with pytest.raises(TypeError), transaction.atomic():
        django_tasks.multiply.delay(1, 2, 3)  # multiply takes two arguments
    with pytest.raises(ValueError), transaction.atomic():
        django_tasks.multiply.apply_async((1, 2), priority=42)  # priorities are 0..9
    assert waiting(client, django_tasks.multiply.queue) == 0


@pytest.mark.parametrize("value", ["on_commit", "outbox"])
def test_a_celery_canvas_waits_for_the_commit(settings: Any, client: Client, value: str) -> None:
    from jobconsole.celery import AsyncResult, chain, group
    from jobconsole.core import JobNotFound
    from tests.celery_tasks import add, mul

    mode(settings, value)

    def sent(result: AsyncResult[Any]) -> bool:
        try:
            return bool(client.get(result.id))
        except JobNotFound:
            return False

    with pytest.raises(Rollback), transaction.atomic():
        dropped = [chain(add.s(1, 1), mul.s(2)).delay(), *group(add.s(1, 1), add.s(2, 2)).delay()]
        raise Rollback
    assert not any(sent(r) for r in dropped)
    with transaction.atomic():
        chained = chain(add.s(1, 1), mul.s(2)).delay()
        grouped = group(add.s(1, 1), add.s(2, 2)).delay()
        with pytest.raises(TypeError):  # checked now, inside the transaction
            chain(add.s(1, 1), add.s(1, 2)).delay()
        assert not sent(chained) and not any(sent(r) for r in grouped)
    assert client.get(chained.id).state is JobState.WAITING and chained.parent is not None
    assert client.get(chained.parent.id).state is JobState.QUEUED
    assert [client.get(r.id).params["args"] for r in grouped] == [[1, 1], [2, 2]]
