"""Fixtures and checks shared by the mirror, admin, outbox and cleaner tests (database tests).

Import the fixtures into a test module with `from tests.mirror_fixtures import *  # noqa: F403`."""

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import redis

import tests.tasks  # noqa: F401  (registers the test tasks)
from jobconsole.core import Client, Worker, default_registry
from jobconsole.core.job import attempt_history
from jobconsole.core.job import ms_to_datetime as ms
from jobconsole.core.keys import queue_keys
from jobconsole.mirror.loop import Mirror
from jobconsole.mirror.resync import Resync
from jobconsole.mirror.writer import Changes, Writer
from jobconsole.models import MirrorResync


@pytest.fixture
def engine_settings(settings: Any, r: "redis.Redis", redis_url: str) -> Iterator[Any]:
    """Point the Django layer (engine.get_client, the mirror, the outbox) at the test Redis."""
    settings.JOBCONSOLE = {
        **settings.JOBCONSOLE,
        "REDIS_URL": redis_url,
        "MIRROR": {**settings.JOBCONSOLE.get("MIRROR", {}), "BLOCK_MS": 20},
    }
    yield settings  # a changed JOBCONSOLE rebuilds the settings cache, the connection and the client


@pytest.fixture
def client(engine_settings: Any) -> Client:
    from jobconsole.engine import get_client

    return get_client()


@pytest.fixture(params=[False, True], ids=["sequential", "overlap"])
def mirror(engine_settings: Any, r: "redis.Redis", request: pytest.FixtureRequest) -> Iterator[Mirror]:
    # Both ways of committing: each batch before the next is read, and overlapping the next batch's reads.
    m = Mirror(r, batch=200, block_ms=20, overlap=request.param)
    yield m
    m.writer.close()


def run_worker(r: "redis.Redis", queues: list[str], **options: Any) -> int:
    worker = Worker(
        r, queues, default_registry, concurrency=options.pop("concurrency", 4), burst=True, maintenance=False,
        **options,
    )  # fmt: skip
    return worker.run()


def redis_jobs(r: "redis.Redis") -> dict[str, dict[str, Any]]:
    """Every job Redis holds, as the fields the mirror must reproduce."""
    out: dict[str, dict[str, Any]] = {}
    for queue in r.smembers("jc:{meta}:queues"):
        k = queue_keys(queue)
        ids: set[str] = set()
        for key in k.sets.values():  # every state's, waiting too
            ids |= set(r.zrange(key, 0, -1))
        for job_id in ids:
            h = r.hgetall(k.job(job_id))
            if not h:
                continue
            history = r.lrange(k.attempts(job_id), 0, -1)
            out[job_id] = {
                "queue": queue, "task": h.get("task"), "state": h.get("state"), "params": h.get("params"),
                "result": h.get("result", ""), "attempts": int(h.get("attempts", 0)),
                "priority": int(h.get("priority", 0)), "finished_at": ms(h.get("finished_at")),
                "run_at": ms(h.get("run_at") or h.get("enqueued_at")),
                "history": [a.outcome for a in attempt_history(h, history)],
            }  # fmt: skip
    return out


def db_jobs() -> dict[str, dict[str, Any]]:
    from jobconsole.models import Job

    out: dict[str, dict[str, Any]] = {}
    for job in Job.objects.filter(in_redis=True).prefetch_related("history"):
        out[job.id] = {
            "queue": job.queue, "task": job.task, "state": job.state, "params": job.params, "result": job.result,
            "attempts": job.attempts, "priority": job.priority, "finished_at": job.finished_at,
            "run_at": job.run_at, "history": [a.outcome for a in job.history.all()],
        }  # fmt: skip
    return out


def assert_db_matches_redis(r: "redis.Redis") -> None:
    in_redis, in_db = redis_jobs(r), db_jobs()
    assert set(in_db) == set(in_redis), (
        f"only in db: {sorted(set(in_db) - set(in_redis))}; only in redis: {sorted(set(in_redis) - set(in_db))}"
    )
    for job_id, expected in in_redis.items():
        assert in_db[job_id] == expected, (
            job_id,
            {k: (v, expected[k]) for k, v in in_db[job_id].items() if v != expected[k]},
        )


def database_url() -> str:
    """A DATABASE_URL for subprocesses, pointing at the test database pytest-django created."""
    from django.db import connection

    d = connection.settings_dict
    if d["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{d['NAME']}"
    auth = d["USER"] + (f":{d['PASSWORD']}" if d.get("PASSWORD") else "")
    return f"postgres://{auth}@{d['HOST'] or '127.0.0.1'}:{d['PORT'] or 5432}/{d['NAME']}"


# --- crashing the mirror at a chosen point -------------------------------------------------------------


class SimulatedCrash(BaseException):
    """Stops the mirror where a kill would (a BaseException, so the loop's error handling lets it through)."""


@dataclass
class Crash:
    """The mirror dies the `on`-th time it reaches `point`:

    before_commit  a batch is written, its transaction not yet committed (it rolls back);
    after_commit   a batch is committed, its entries not yet acknowledged (they stay pending);
    resynced       a queue was resynced (rows, cursor and group), nothing after;
    rewound        a rewind was handled (every queue resynced, the epoch moved and recorded)."""

    point: str
    on: int = 1
    seen: int = 0

    def at(self, point: str) -> None:
        if point == self.point:
            self.seen += 1
            if self.seen == self.on:
                self.crash()

    def crash(self) -> None:
        raise SimulatedCrash(self.point)


class Exit(Crash):
    """The process exits at once, without cleanup, as SIGKILL would."""

    def crash(self) -> None:
        os._exit(137)


def crashing(crash: Crash) -> dict[str, Any]:
    """Mirror's `writer` and `resync` parts, with `crash` hooked in at its points."""

    class CrashingWriter(Writer):
        def save(self, changes: Changes) -> None:
            super().save(changes)
            crash.at("before_commit")

        def acknowledge(self, changes: Changes) -> None:
            crash.at("after_commit")
            super().acknowledge(changes)

    class CrashingResync(Resync):
        def queue(self, queue: str, reason: str) -> MirrorResync:
            record = super().queue(queue, reason)
            crash.at("resynced")
            return record

        def rewound(self, queues: Sequence[str]) -> None:
            super().rewound(queues)
            crash.at("rewound")

    return {"writer": CrashingWriter, "resync": CrashingResync}


def crashing_mirror(r: "redis.Redis", crash: Crash, **options: Any) -> Mirror:
    return Mirror(r, **crashing(crash), **options)


# For a subprocess: `manage.py runmirror ARGS` whose process exits at POINT:N (see Crash), as if killed there.
RUNMIRROR_EXITING = [
    "-c",
    "import django; django.setup(); from tests.mirror_fixtures import runmirror_exiting; runmirror_exiting()",
]


def runmirror_exiting() -> None:
    from django.core.management import call_command

    from jobconsole.management.commands import runmirror

    point, _, n = sys.argv[1].partition(":")
    parts = crashing(Exit(point, int(n or 1)))
    build = runmirror.build_service
    runmirror.build_service = lambda **options: build(**options, **parts)
    call_command("runmirror", *sys.argv[2:])
