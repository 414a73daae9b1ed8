"""The health of the service around the queues, as findings an operator can act on: Redis answering, Redis taking
writes, the database answering, the mirror's lag, and a live worker for every queue with waiting jobs.

Each finding has a severity (ok, degraded, down), a component and a reason in a sentence. **Down** is what makes a
web process useless: Redis unreachable, the database unreachable. Everything else is **degraded**: the process
still serves, but something needs an operator. Redis refusing writes is degraded, not down: every web process sees
the same Redis, so a load balancer taking them all out helps nobody, while the console is what shows what to free.

health.py judges the queues themselves (delays, retries, failures, by Runqueue's rules); the routes report both:
/healthz (the balancer's probe: Redis, its writes and the database only, so that a probe every few seconds costs
one PING, one small SET and one SELECT 1), /health (the Go scheduler seed's), /runqueue/health and the console's
overview (every finding)."""

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import IntEnum
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import redis
from django.db import DatabaseError, connection

from jobconsole.conf import get_config, health_config
from jobconsole.core import Client, redis_health
from jobconsole.core.queries import Queries
from jobconsole.core.queries.workers import WorkerInfo
from jobconsole.engine import get_client
from jobconsole.health import Level, duration

REDIS = "redis"
REDIS_WRITES = "redis-writes"
DATABASE = "database"
MIRROR = "mirror"
WORKERS = "workers"
EVERY_COMPONENT = (REDIS, REDIS_WRITES, DATABASE, MIRROR, WORKERS)
PROBE = (REDIS, REDIS_WRITES, DATABASE)  # what /healthz checks
SILENCEABLE = (MIRROR, WORKERS)  # an operator may silence these degraded findings, never Redis's or the database's
# How the console names each component (the ids above are the JSON's, /healthz and the API).
LABELS = {REDIS: "Redis", REDIS_WRITES: "Redis writes", DATABASE: "Database", MIRROR: "Database mirror",
          WORKERS: "Workers"}  # fmt: skip


class Severity(IntEnum):
    OK = 0
    DEGRADED = 1
    DOWN = 2

    @property
    def label(self) -> str:
        return self.name.lower()

    @property
    def level(self) -> Level:
        """Runqueue's colour: ok green, degraded yellow, down red."""
        return Level(self.value)


@dataclass(frozen=True, slots=True)
class Finding:
    severity: Severity
    component: str
    reason: str
    subject: str = ""  # what it is about within its component: the queue of a workers finding (alarms.py's key)

    @property
    def label(self) -> str:
        return LABELS.get(self.component, self.component)

    def as_json(self) -> dict[str, str]:
        return {"severity": self.severity.label, "component": self.component, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class ServiceHealth:
    findings: list[Finding]  # in the order checked, the silenced ones left out
    at: datetime
    timings: dict[str, float] = field(default_factory=dict)  # redis_ms, database_ms: round trips that answered
    silenced: list[Any] = field(default_factory=list)  # alarms.Silenced: degraded findings an operator silenced

    @property
    def severity(self) -> Severity:
        return max((f.severity for f in self.findings), default=Severity.OK)

    @property
    def status(self) -> str:
        return self.severity.label

    @property
    def problems(self) -> list[Finding]:
        """The findings that are not ok, worst first."""
        return sorted((f for f in self.findings if f.severity), key=lambda f: -f.severity)

    def down(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.DOWN]


class QueueFigures(Protocol):
    """What the workers rule reads of a queue (QueueGauges and health.QueueHealth both have it)."""

    @property
    def queue(self) -> str: ...
    @property
    def queued(self) -> int: ...
    @property
    def paused(self) -> bool: ...


def check(
    components: Sequence[str] = EVERY_COMPONENT,
    *,
    client: Client | None = None,
    queues: Sequence[QueueFigures] | None = None,
    silences: bool = True,
) -> ServiceHealth:
    """The findings of these components, now. `queues`: the queues' figures when the caller has read them already
    (health.check() has), so the workers rule reads no queue again. A full check sets the mirror's and workers'
    degraded findings an operator silenced apart (`silenced`, alarms.py); `silences=False` keeps every one."""
    client = client or get_client()
    queries = client.queries
    findings: list[Finding] = []
    timings: dict[str, float] = {}
    redis_up = True
    if REDIS in components or REDIS_WRITES in components or MIRROR in components or WORKERS in components:
        finding = _ping(queries, timings)
        redis_up = not finding.severity
        findings.append(finding)
    if redis_up and REDIS_WRITES in components:
        findings.append(_writes(queries))
    database_up = True
    if DATABASE in components:
        database_finding = _database(timings)
        database_up = not database_finding.severity
        findings.append(database_finding)
    # The mirror and the workers are judged from Redis (and the database): with either down they say nothing new.
    if redis_up and (MIRROR in components or WORKERS in components):
        try:
            if WORKERS in components:
                findings += _workers(queries, queues)
            if MIRROR in components and database_up:
                findings.append(_mirror(queries))
        except redis.RedisError as exc:  # Redis went away between the ping and now
            findings.append(Finding(Severity.DOWN, REDIS, f"Redis unreachable: {_error(exc)}."))
        except DatabaseError as exc:
            findings.append(Finding(Severity.DOWN, DATABASE, f"database unreachable: {_error(exc)}."))
    silenced: list[Any] = []
    if silences and redis_up and database_up and MIRROR in components and WORKERS in components:
        findings, silenced = _silence(findings)
    return ServiceHealth(findings, datetime.now(UTC), timings, silenced)


def _silence(findings: list[Finding]) -> tuple[list[Finding], list[Any]]:
    """The mirror's and the workers' degraded findings an operator silenced (alarms.py), set apart; a Redis or
    database problem is never silenced."""
    from jobconsole import alarms  # it imports this module's types

    silenceable = [f for f in findings if f.component in SILENCEABLE and f.severity is Severity.DEGRADED]
    loud, silenced = alarms.split(silenceable, key=alarms.finding_key, service=True)
    dropped = {id(f) for f in silenceable} - {id(f) for f in loud}
    return [f for f in findings if id(f) not in dropped], silenced


def _error(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__).strip().rstrip(".")


def _ping(queries: Queries, timings: dict[str, float]) -> Finding:
    started = time.monotonic()
    try:
        queries.ping()
    except redis.ResponseError as exc:
        # Redis answers PING with MISCONF while it cannot persist: it is reachable, and the write probe says why.
        if redis_health.refusal_kind(exc) != redis_health.MISCONF:
            return Finding(Severity.DOWN, REDIS, f"Redis unreachable: {_error(exc)}.")
    except redis.RedisError as exc:
        return Finding(Severity.DOWN, REDIS, f"Redis unreachable: {_error(exc)}.")
    timings["redis_ms"] = round((time.monotonic() - started) * 1000, 2)
    return Finding(Severity.OK, REDIS, f"Redis answers ({timings['redis_ms']} ms).")


def _writes(queries: Queries) -> Finding:
    try:
        refusal = redis_health.probe_writes(queries.redis)
    except redis.RedisError as exc:
        return Finding(Severity.DOWN, REDIS, f"Redis unreachable: {_error(exc)}.")
    if refusal is None:
        return Finding(Severity.OK, REDIS_WRITES, "Redis accepts writes.")
    return Finding(Severity.DEGRADED, REDIS_WRITES, refusal_reason(refusal, redis_address()))


def refusal_reason(refusal: redis_health.WriteRefusal, address: str) -> str:
    """What an operator reads when Redis refuses writes: Redis's words, the figures, and what to do."""
    error = refusal.error.split(". ", 1)[0].rstrip(".")  # MISCONF's explanation runs on for four sentences
    detail = f" ({refusal.detail})" if refusal.detail else ""
    if refusal.kind == redis_health.READONLY:
        return (
            f"Redis at {address} is a read-only replica{detail} — after a failover, point REDIS_URL/Sentinel at the "
            f"new primary; every submission is refused until then."
        )
    then = {
        redis_health.OOM: "new jobs are refused (503) until memory is freed (purge dead or finished jobs, shorten "
        "RETENTION) or maxmemory is raised; jobs already in Redis still run",
        redis_health.MISCONF: "Redis cannot persist to disk and refuses every write until it can: look at its log "
        "and the disk it saves to",
        redis_health.NOREPLICAS: "fewer replicas answer than min-replicas-to-write asks: look at the replicas",
    }.get(refusal.kind, "new jobs are refused")
    return f"Redis refuses writes: {error}{detail}; {then}."


def redis_address() -> str:
    """REDIS_URL without its password."""
    url = get_config()["REDIS_URL"]
    try:
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "REDIS_URL"


def _database(timings: dict[str, float]) -> Finding:
    started = time.monotonic()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        return Finding(Severity.DOWN, DATABASE, f"database unreachable: {_error(exc)}.")
    timings["database_ms"] = round((time.monotonic() - started) * 1000, 2)
    return Finding(Severity.OK, DATABASE, f"The database answers ({timings['database_ms']} ms).")


def _mirror(queries: Queries) -> Finding:
    from jobconsole.mirror.lag import measure  # the mirror's models need Django's apps ready

    bound = health_config()["MIRROR_LAG"]
    lag = measure(queries, queries.queues.names())
    if bound <= 0 or lag.seconds <= bound:
        said = "has every event" if not lag.behind else f"lags {duration(lag.seconds)}"
        limit = f"its bound is {duration(bound)}" if bound > 0 else "HEALTH.MIRROR_LAG is off"
        return Finding(Severity.OK, MIRROR, f"The database mirror {said} ({limit}).")
    why = (
        "a mirror holds the leader lock but is not keeping up: look at its log, and at the database's load"
        if lag.leader_running
        else "no mirror is running (runworker with MIRROR.IN_WORKER, or runmirror)"
    )
    return Finding(
        Severity.DEGRADED, MIRROR,
        f"mirror lag {duration(lag.seconds)}, past its bound of {duration(bound)}: the console's database lacks "
        f"events of {lag.behind} queue{'s' if lag.behind != 1 else ''} (the oldest on '{lag.queue}'); {why}.",
    )  # fmt: skip


def _workers(queries: Queries, queues: Sequence[QueueFigures] | None) -> list[Finding]:
    if queues is None:
        queues = queries.queues.gauges(queries.queues.names())
    workers = queries.workers.all()
    live = [w for w in workers if w.state == "running"]
    now = datetime.now(UTC)
    findings: list[Finding] = []
    for q in sorted(queues, key=lambda q: q.queue):
        if q.queued <= 0 or any(q.queue in w.queues for w in live):
            continue
        jobs = f"{q.queued} waiting job{'s' if q.queued != 1 else ''}"
        if q.paused:
            findings.append(Finding(
                Severity.OK, WORKERS, f"queue '{q.queue}' is paused with {jobs} and no live worker serves it.",
            ))  # fmt: skip
            continue
        quiet = sum(1 for w in workers if w.state == "quiet" and q.queue in w.queues)
        why = (f" ({quiet} quiet worker{'s' if quiet != 1 else ''}: an operator's; resume one on the Workers page)"
               if quiet else _last_seen(q.queue, workers, now))  # fmt: skip
        findings.append(Finding(
            Severity.DEGRADED, WORKERS, f"queue '{q.queue}' has {jobs} and no live worker serves it{why}.", q.queue,
        ))  # fmt: skip
    if not any(f.severity for f in findings):
        threads = sum(w.concurrency for w in live)
        findings.insert(0, Finding(
            Severity.OK, WORKERS,
            f"{len(live)} live worker{'s' if len(live) != 1 else ''} ({threads} threads); every queue with waiting "
            f"jobs (paused ones aside) has one.",
        ))  # fmt: skip
    return findings


def _last_seen(queue: str, workers: list[WorkerInfo], now: datetime) -> str:
    """When a worker of the queue last beat, if the registry still remembers one (stopping, or gone)."""
    beats = [w.heartbeat_at for w in workers if queue in w.queues and w.heartbeat_at is not None]
    if not beats:
        return " (is a runworker for it deployed?)"
    ago = max((now - max(beats)).total_seconds(), 0)
    return f" (its last worker was seen {duration(ago)} ago)"


def as_json(result: ServiceHealth) -> dict[str, Any]:
    return {"status": result.status, "findings": [f.as_json() for f in result.findings]}
