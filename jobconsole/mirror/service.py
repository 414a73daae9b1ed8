"""The mirror as deployed: configured from settings, with the leader's chores (the outbox relay, database
retention and pruning of published outbox entries, the metrics rollup, queue-depth samples, the metrics'
retention, and the OpenTelemetry export when the OTEL environment asks for it), run by `runmirror` and by
runworker's mirror thread.

The chores run in the mirror's thread, between its steps, and only while this process leads the mirror: one
process among all the workers does them, and they never write to the database at the same time as a batch."""

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from django.db import connection

from jobconsole import cleaning, outbox
from jobconsole.conf import get_config, metrics_config, mirror_config
from jobconsole.db_connections import recover
from jobconsole.engine import get_redis
from jobconsole.metrics import otlp, rollup, sampling
from jobconsole.mirror.leader import Leadership
from jobconsole.mirror.loop import Mirror

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Chore:
    name: str
    every: float  # seconds
    fn: Callable[[], object]
    last: float = -math.inf  # time.monotonic() of its last run: due at once


class Chores:
    """Runs each chore that is due, while `leadership` leads; a failing chore is logged and tried again later."""

    def __init__(self, leadership: Leadership, chores: Sequence[Chore] = ()) -> None:
        self.leadership = leadership
        self.chores = list(chores)

    def run_due(self) -> None:
        if not self.leadership.leader:
            return
        now = time.monotonic()
        for chore in self.chores:
            if now - chore.last >= chore.every:
                chore.last = now
                try:
                    chore.fn()
                except Exception as exc:
                    if not recover(f"mirror chore {chore.name}", exc):  # a dropped connection: the next run reconnects
                        log.exception("mirror chore %s failed", chore.name)


class MirrorService:
    """A mirror and the chores of its leader, driven by one thread."""

    def __init__(self, mirror: Mirror, chores: Chores) -> None:
        self.mirror = mirror
        self.chores = chores

    def run(self, stop: threading.Event) -> None:
        """Mirror, and do the chores as they fall due, until `stop` is set."""
        try:
            while not stop.is_set():
                if self.mirror.turn(stop):
                    self.chores.run_due()
        finally:
            self.mirror.close()

    def burst(self) -> None:
        """Apply everything in the streams, do the chores once, and let go of the lead."""
        try:
            self.mirror.drain()
            self.chores.run_due()
        finally:
            self.mirror.release()


def build_mirror(connection_: "redis.Redis | None" = None, **overrides: Any) -> Mirror:
    """The mirror configured from settings (`overrides` are Mirror's keyword arguments)."""
    config = mirror_config()
    options: dict[str, Any] = {
        "batch": int(config["BATCH"]),
        "block_ms": int(config["BLOCK_MS"]),
        "settle_ms": int(config["SETTLE_MS"]),
        "pace_ms": int(config["PACE_MS"]),
        # PostgreSQL commits in its own process: building the next batch meanwhile gains a sixth (bench/
        # mirror_capacity.py). SQLite commits in this one, under the interpreter lock, and gains nothing.
        "overlap": connection.vendor == "postgresql",
        "lock_ttl": float(config["LOCK_TTL"]),
        "events_maxlen": int(get_config()["EVENTS_MAXLEN"]),
        "restore": bool(config["RESTORE"]),
        **overrides,
    }
    return Mirror(connection_ or get_redis(), **options)


def leader_chores(leadership: Leadership) -> Chores:
    """The chores one process does for everyone, at the intervals the settings give."""
    config = mirror_config()
    metrics = metrics_config()
    chores = Chores(
        leadership,
        [
            Chore("outbox relay", float(config["RELAY_EVERY"]), outbox.relay),
            Chore("database retention", float(config["RETENTION_EVERY"]), cleaning.enforce_db_retention),
            Chore("outbox prune", float(config["RETENTION_EVERY"]), outbox.prune),
            Chore("metrics rollup", float(metrics["ROLLUP_EVERY"]), rollup.rollup),
            Chore("queue depth samples", float(metrics["SAMPLE_EVERY"]), sampling.sample),
            Chore("metrics retention", float(config["RETENTION_EVERY"]), rollup.prune),
        ],
    )
    export = otlp.from_environment()  # OTEL_EXPORTER_OTLP_ENDPOINT & co.; it only wakes its own thread
    if export is not None:
        chores.chores.append(Chore("OpenTelemetry metrics export", otlp.interval(), export.trigger))
    return chores


def build_service(connection_: "redis.Redis | None" = None, **overrides: Any) -> MirrorService:
    """The mirror and its leader's chores, configured from settings (what runmirror and runworker run)."""
    mirror = build_mirror(connection_, **overrides)
    return MirrorService(mirror, leader_chores(mirror.leadership))
