"""Honest health (issue 27): Redis refusing writes (full, unable to persist, a read-only replica), the mirror's lag,
queues with waiting jobs and no live worker, and the database unreachable, reported by /healthz, /health,
/runqueue/health and the console's overview with reasons an operator can act on. /healthz fails (503) only on
what makes the process useless: Redis or the database unreachable."""

import re
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client as WebClient

from jobconsole import service_health
from jobconsole.core.connection import connect
from jobconsole.core.store import Store
from jobconsole.service_health import Severity
from tests.mirror_fixtures import *  # noqa: F403
from tests.redis_server import RedisServer, free_port

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def point_at(settings: Any) -> Any:
    """Point the engine at a Redis URL, with anonymous seed callers (as `make run` has them)."""

    def point(url: str) -> None:
        settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": url, "API": {"ANONYMOUS_SEEDS": True}}

    return point


def browser() -> WebClient:
    user = User.objects.create_user(f"u{User.objects.count()}", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="jobconsole", codename="view_job"))
    web = WebClient()
    web.force_login(user)
    return web


def problems(body: dict[str, Any]) -> list[str]:
    return [f["reason"] for f in body["findings"] if f["severity"] != "ok"]


def test_redis_full_is_degraded_on_every_route_and_healthz_stays_200(own_redis: RedisServer, point_at: Any) -> None:
    point_at(own_redis.url)
    r = connect(own_redis.url)
    r.config_set("maxmemory", 1)  # used memory is past it: every write a submission makes is refused
    try:
        web = WebClient()
        healthz = web.get("/healthz")
        body = healthz.json()
        assert healthz.status_code == 200 and body["status"] == "degraded", body
        [reason] = problems(body)
        assert reason.startswith("Redis refuses writes: OOM command not allowed when used memory > 'maxmemory'")
        assert re.search(
            r"\(used [\d.]+ [KM]B of 1 B, maxmemory-policy noeviction\); new jobs are refused \(503\)", reason
        )
        assert body["redis_ms"] >= 0 and body["database_ms"] >= 0

        health = web.get("/health")
        assert health.status_code == 200 and health.json()["status"] == "degraded"
        assert health.json()["reasons"][0].startswith("Redis refuses writes: OOM command not allowed")

        runqueue = web.get("/runqueue/health")
        assert runqueue.status_code == 200 and runqueue.json()["status"] == "y", runqueue.content
        assert runqueue.json()["reasons"][0].startswith("Redis refuses writes: OOM command not allowed")

        overview = browser().get("/")
        text = overview.content.decode()
        assert overview.status_code == 200 and 'id="service-health"' in text and "notice service-banner warn" in text
        assert "Redis refuses writes: OOM command not allowed" in text
    finally:
        r.config_set("maxmemory", 0)
    assert WebClient().get("/healthz").json()["status"] == "healthy"


def test_a_read_only_replica_is_named_with_what_to_do(own_redis: RedisServer, point_at: Any, tmp_path: Any) -> None:
    replica = RedisServer(tmp_path / "replica").start()
    try:
        connect(replica.url).replicaof("127.0.0.1", own_redis.port)
        point_at(replica.url)
        response = WebClient().get("/healthz")
        body = response.json()
        assert response.status_code == 200 and body["status"] == "degraded"
        [finding] = [f for f in body["findings"] if f["severity"] != "ok"]
        assert finding["component"] == "redis-writes"
        assert finding["reason"].startswith(
            f"Redis at redis://127.0.0.1:{replica.port}/0 is a read-only replica (role: slave of 127.0.0.1:"
            f"{own_redis.port}, link "
        ), finding
        assert "after a failover, point REDIS_URL/Sentinel at the new primary" in finding["reason"]
    finally:
        replica.kill()


def test_redis_unable_to_persist_misconf(own_redis: RedisServer, point_at: Any) -> None:
    point_at(own_redis.url)
    r = connect(own_redis.url)
    r.config_set("save", "3600 1")  # RDB snapshots on, stop-writes-on-bgsave-error yes (the default)
    shutil.rmtree(own_redis.dir)  # the next snapshot cannot be written, root or not
    r.bgsave()
    deadline = time.monotonic() + 10
    while r.info("persistence")["rdb_last_bgsave_status"] != "err":
        assert time.monotonic() < deadline, "the snapshot did not fail"
        time.sleep(0.05)
    try:
        body = WebClient().get("/healthz").json()
        assert body["status"] == "degraded", body
        [reason] = problems(body)
        assert reason.startswith(
            "Redis refuses writes: MISCONF Redis is configured to save RDB snapshots, but it's currently unable to "
            "persist to disk (RDB snapshots failing (rdb_last_bgsave_status: err));"
        ), reason
    finally:
        r.config_set("save", "")


def test_waiting_jobs_without_a_live_worker_are_degraded_naming_the_queue(client: Any, r: "redis.Redis") -> None:
    client.enqueue("examples.echo", {}, queue="emails")
    client.enqueue("examples.echo", {}, queue="later", delay=600)  # scheduled, not waiting: no worker needed yet
    client.enqueue("examples.echo", {}, queue="held")
    client.pause("held")
    result = service_health.check()
    [degraded] = result.problems
    assert (degraded.severity, degraded.component) == (Severity.DEGRADED, "workers")
    assert degraded.reason == (
        "queue 'emails' has 1 waiting job and no live worker serves it (is a runworker for it deployed?)."
    )
    assert any(f.severity is Severity.OK and "queue 'held' is paused" in f.reason for f in result.findings)
    assert WebClient().get("/health").json()["reasons"] == [degraded.reason]

    now_ms = client.queries.now_ms()
    Store(r).register_worker(
        "host:1:w", ttl_s=30, now_ms=now_ms,
        info={"host": "host", "pid": 1, "queues": "emails", "concurrency": 4, "state": "running",
              "started_at": now_ms, "heartbeat_at": now_ms},
    )  # fmt: skip
    result = service_health.check()
    assert result.severity is Severity.OK, result.problems
    assert any(f.reason.startswith("1 live worker (4 threads)") for f in result.findings)
    assert WebClient().get("/health").json() == {"status": "healthy"}


def test_a_stopping_worker_no_longer_serves_and_its_last_beat_is_told(client: Any, r: "redis.Redis") -> None:
    client.enqueue("examples.echo", {}, queue="emails")
    now_ms = client.queries.now_ms()
    Store(r).register_worker(
        "host:1:w", ttl_s=30, now_ms=now_ms - 180_000,
        info={"queues": "emails", "concurrency": 4, "state": "stopping", "heartbeat_at": now_ms - 180_000},
    )  # fmt: skip
    [degraded] = service_health.check().problems
    assert degraded.reason.endswith("no live worker serves it (its last worker was seen 3 min ago).")


def test_mirror_lag_past_its_bound_then_caught_up(client: Any, mirror: Any, engine_settings: Any) -> None:
    engine_settings.JOBCONSOLE = {**engine_settings.JOBCONSOLE, "HEALTH": {"MIRROR_LAG": 1}}
    client.enqueue("examples.echo", {}, queue="emails", delay=600)
    time.sleep(1.3)
    [finding] = [f for f in service_health.check().findings if f.component == "mirror"]
    assert finding.severity is Severity.DEGRADED
    assert finding.reason.startswith("mirror lag ") and ", past its bound of 1 s:" in finding.reason
    assert "(the oldest on 'emails'); no mirror is running" in finding.reason
    mirror.drain()
    [finding] = [f for f in service_health.check().findings if f.component == "mirror"]
    assert (finding.severity, finding.reason) == (
        Severity.OK,
        "The database mirror has every event (its bound is 1 s).",
    )


@pytest.fixture
def database_gone() -> Iterator[None]:
    """The database unreachable: the connection reopened with settings that cannot connect."""
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "sqlite":
        connection.settings_dict["NAME"] = "/nonexistent-directory/jobconsole.sqlite3"
    else:
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(free_port()))  # nothing listens there
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


def test_database_unreachable_is_503(point_at: Any, redis_url: str, r: "redis.Redis", database_gone: None) -> None:
    point_at(redis_url)
    web = WebClient()
    healthz = web.get("/healthz")
    body = healthz.json()
    assert healthz.status_code == 503 and healthz["Retry-After"] == "5"
    assert body["status"] == "unavailable" and body["failed"] == ["database"], body
    assert body["database"].startswith("database unreachable: ") and body["redis_ms"] >= 0
    health = web.get("/health")
    assert health.status_code == 503 and health.json()["status"] == "unhealthy"
    assert health.json()["error"].startswith("database unreachable: ")
