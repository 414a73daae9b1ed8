"""What an enqueue made inside a database transaction does, for Django's task backend (jobconsole/django_backend.py)
and the Celery-style calls (jobconsole/celery.py): JOBCONSOLE["IN_TRANSACTION"].

    "on_commit" (default)  the job is enqueued when the outermost transaction commits, and never if it rolls back
                           (its id is made now, so results can be asked for it); outside a transaction, at once.
                           A process that dies between the commit and the enqueue loses the job.
    "outbox"               the job is written to the outbox in the caller's transaction and published after
                           commit; the relay publishes what a dead process left (jobconsole/outbox.py).
    "now"                  enqueued at once, whatever the transaction does (Celery's plain delay()).

The engine's own Client.enqueue is always "now"; jobconsole.outbox.enqueue always "outbox". The job is validated
when it is asked for in every mode, so a bad job raises inside the caller's transaction."""

import dataclasses
from typing import Any, Literal

from django.db import transaction

from jobconsole.conf import get_config
from jobconsole.core import JobSpec
from jobconsole.core.ids import new_job_id
from jobconsole.engine import get_client

type Mode = Literal["on_commit", "outbox", "now"]
MODES: tuple[Mode, ...] = ("on_commit", "outbox", "now")


def configured_mode() -> Mode:
    mode = get_config()["IN_TRANSACTION"]
    assert mode in MODES, mode  # conf.py's check refuses anything else
    return mode


def enqueue(task: str, params: dict[str, Any], *, mode: Mode | None = None, **options: Any) -> str:
    """Enqueue a job as `mode` (by default the IN_TRANSACTION setting) has it; returns its id. Options are
    Client.enqueue's (id, queue, priority, delay, run_at...)."""
    mode = mode or configured_mode()
    if mode == "outbox":
        from jobconsole import outbox  # its models: imported when used, so that importing this never needs them

        return outbox.enqueue(task, params, **options)
    if mode == "on_commit" and transaction.get_connection().in_atomic_block:
        options = {**options, "id": options.get("id") or new_job_id()}
        get_client().check(JobSpec(task=task, params=params, **options))  # raises InvalidJob now, not at commit
        # robust: a Redis error at commit is logged (django.db.backends) and the other on-commit hooks still run.
        transaction.on_commit(lambda: get_client().enqueue(task, params, **options), robust=True)
        return str(options["id"])
    return get_client().enqueue(task, params, **options).id


def enqueue_many(specs: list[JobSpec], *, mode: Mode | None = None) -> list[str]:
    """Several jobs as `enqueue` does one, all validated before any is sent (Client.enqueue_many); their ids."""
    mode = mode or configured_mode()
    if mode == "outbox" or (mode == "on_commit" and transaction.get_connection().in_atomic_block):
        specs = [s if s.id else dataclasses.replace(s, id=new_job_id()) for s in specs]  # known before the commit
    if mode == "outbox":
        from jobconsole import outbox

        with transaction.atomic():  # all of them or none
            return [outbox.enqueue(s.task, s.params, **{f.name: getattr(s, f.name) for f in dataclasses.fields(s)
                                                         if f.name not in ("task", "params")})
                    for s in specs]  # fmt: skip
    if mode == "on_commit" and transaction.get_connection().in_atomic_block:
        client = get_client()
        for spec in specs:
            client.check(spec)
        transaction.on_commit(lambda: get_client().enqueue_many(specs), robust=True)
        return [str(s.id) for s in specs]
    return [r.id for r in get_client().enqueue_many(specs)]
