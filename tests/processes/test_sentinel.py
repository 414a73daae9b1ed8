"""A Sentinel-managed Redis (tests/sentinel_servers.py: a primary, a replica and three Sentinels on loopback) under
a real `manage.py runworker` (with the database mirror in it), a producer thread and the web's health probe, all
given only `REDIS_URL=redis+sentinel://...`. The primary is killed; the Sentinels promote the replica; every job
the producer had accepted runs and reaches the database without anyone restarting anything."""

import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import redis
from django.test import Client as WebClient

from jobconsole.core import Client, JobState, NotReplicated
from jobconsole.core.connection import connect, without_retries
from jobconsole.core.errors import JobNotFound
from jobconsole.core.ids import new_job_id
from jobconsole.core.sentinel import parse_url
from tests.conftest import PROJECT, PYTHON, manage_env
from tests.live import wait_until
from tests.sentinel_servers import SentinelSetup

QUEUE = "sentinel"


@pytest.fixture
def sentinel_setup(tmp_path: Path) -> Iterator[SentinelSetup]:
    setup = SentinelSetup(tmp_path / "sentinel").start()
    yield setup
    setup.stop()


def test_the_url_names_sentinels_service_db_and_passwords() -> None:
    target = parse_url("redis+sentinel://:s3cret@10.0.0.1:26379,sentinel-b:26380/jobs/2?sentinel_password=x%2By")
    assert target.sentinels == (("10.0.0.1", 26379), ("sentinel-b", 26380))
    assert (target.service, target.db, target.password, target.sentinel_password) == ("jobs", 2, "s3cret", "x+y")
    assert parse_url("redis+sentinel://h:1/jobs?password=p").password == "p"
    assert parse_url("rediss+sentinel://h:1/jobs").ssl
    for wrong in ("redis+sentinel://h:1", "redis+sentinel://h/jobs", "redis+sentinel://h:1/jobs/x",
                  "redis+sentinel://h:1/jobs?db=2"):  # fmt: skip
        with pytest.raises(ValueError):
            parse_url(wrong)


class Producer(threading.Thread):
    """Enqueues a job every few milliseconds with WAIT 1. A job whose enqueue failed (the primary gone) is sent
    again under the same id until Redis answers: enqueueing an id twice is idempotent."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.client = Client(connect(url), strict=False, replicas=1, replicas_timeout=0.5)
        self.replicated: list[str] = []  # acknowledged by the primary and a replica
        self.unreplicated: list[str] = []  # accepted by a primary that had no replica to confirm it
        self.errors = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            job_id = new_job_id()
            while not self.stop.is_set():
                try:
                    self.client.enqueue("examples.echo", {"n": 1}, id=job_id, queue=QUEUE)
                    self.replicated.append(job_id)
                    break
                except NotReplicated:
                    self.unreplicated.append(job_id)
                    break
                except redis.RedisError:
                    self.errors += 1
                    time.sleep(0.05)
            time.sleep(0.01)


def mirrored_states(database: Path, ids: list[str]) -> dict[str, str]:
    with closing(sqlite3.connect(database)) as db:
        rows = db.execute(f"SELECT id, state FROM jobconsole_job WHERE queue = '{QUEUE}'").fetchall()
    wanted = set(ids)
    return {job_id: state for job_id, state in rows if job_id in wanted}


@pytest.mark.slow
@pytest.mark.django_db
@pytest.mark.timeout(120)
def test_worker_producer_mirror_and_web_carry_on_across_a_failover(
    sentinel_setup: SentinelSetup, tmp_path: Path, settings: Any
) -> None:
    url = sentinel_setup.url
    (tmp_path / "var").mkdir()
    env = manage_env(url, tmp_path, JOBCONSOLE_MIRROR_LOCK_TTL="2")
    subprocess.run([PYTHON, "manage.py", "migrate", "--verbosity", "0"], cwd=PROJECT, env=env, check=True, timeout=120)
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [PYTHON, "manage.py", "runworker", "--queues", QUEUE, "--name", "w1", "--no-system-worker"],
            cwd=PROJECT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": url}  # the web's engine, on the same Sentinels
    web = WebClient()
    producer = Producer(url)
    try:
        wait_until(lambda: "worker=w1 started" in log.read_text(), 30, "the worker to start", log.read_text)
        assert web.get("/healthz").status_code == 200
        ping = without_retries(connect(url))  # the worker's kind of client: never re-sends by itself
        assert ping.ping()
        producer.start()
        wait_until(lambda: len(producer.replicated) >= 20, 20, "jobs enqueued before the fault", log.read_text)
        old_port = sentinel_setup.primary.port
        sentinel_setup.kill_primary()
        assert web.get("/healthz").status_code == 503  # the probe says so while there is no primary
        took = sentinel_setup.wait_failover()
        assert sentinel_setup.primary_port() != old_port
        wait_until(lambda: web.get("/healthz").status_code == 200, 10, "the web to reach the new primary")
        assert wait_until(lambda: _pings(ping), 10, "the worker's kind of client to reconnect")
        before = len(producer.replicated) + len(producer.unreplicated)
        wait_until(
            lambda: len(producer.replicated) + len(producer.unreplicated) >= before + 20, 20,
            "the producer to carry on", log.read_text,
        )  # fmt: skip
    finally:
        producer.stop.set()
        producer.join(timeout=10)
    try:
        client = Client(connect(url), strict=False)
        # Jobs WAIT confirmed before the fault, and every job the new primary accepted: none may be lost.
        kept = producer.replicated + producer.unreplicated
        wait_until(lambda: _all_completed(client, kept), 30, f"{len(kept)} jobs to complete", log.read_text)
        database = tmp_path / "var" / "jobconsole.sqlite3"
        wait_until(
            lambda: set(mirrored_states(database, kept).values()) == {"completed"}
            and len(mirrored_states(database, kept)) == len(kept),
            30, "the mirror to record every job completed", log.read_text,
        )  # fmt: skip
        assert worker.poll() is None, log.read_text()[-4000:]  # it rode the failover out, never restarted
        print(f"failover took {took:.1f}s; {len(kept)} jobs, {producer.errors} enqueue errors retried")
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def _pings(client: "redis.Redis") -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def _all_completed(client: Client, ids: list[str]) -> bool:
    for job_id in ids:
        try:
            if client.get(job_id, QUEUE, history=False).state is not JobState.COMPLETED:
                return False
        except JobNotFound:
            return False
    return True
