"""Settings of the Django-side loops (mirror, outbox relay, database retention), with their defaults.

They live under JOBCONSOLE["MIRROR"], JOBCONSOLE["DB_RETENTION"] and JOBCONSOLE["OUTBOX"]; README.md
("Mirror, admin and outbox") documents each key."""

from datetime import timedelta
from typing import Any

from jobconsole.conf import get_config

DAY = 86_400

MIRROR_DEFAULTS: dict[str, Any] = {
    "IN_WORKER": True,  # runworker also runs the mirror loop in a thread (one leader among all processes)
    "BATCH": 1000,  # events read and applied per transaction
    "BLOCK_MS": 100,  # how long an idle mirror waits for new events before looking again
    "LOCK_TTL": 10.0,  # seconds; the leader renews every LOCK_TTL / 3
    "RETENTION_EVERY": 300.0,  # seconds between database retention passes
    "RELAY_EVERY": 2.0,  # seconds between outbox relay passes
    "RESTORE": True,  # after Redis lost data, enqueue again the jobs the database knew as waiting or running
}

# How long the database keeps rows after the job finished (seconds). Rows still present in Redis are
# never removed, so the database always keeps at least as much history as Redis.
DB_RETENTION_DEFAULTS: dict[str, float] = {
    "completed": 30 * DAY,
    "failed": 30 * DAY,
    "cancelled": 30 * DAY,
    "dropped": 90 * DAY,
    "dead": 90 * DAY,  # dead jobs and their dead-letter records
    "audit": 365 * DAY,
}

OUTBOX_DEFAULTS: dict[str, Any] = {
    "RELAY_AFTER": 5.0,  # seconds after commit before the relay republishes an unpublished entry
    "KEEP_PUBLISHED": 7 * DAY,  # published entries are deleted after this long
}


def mirror_config() -> dict[str, Any]:
    return {**MIRROR_DEFAULTS, **get_config().get("MIRROR", {})}


def db_retention() -> dict[str, timedelta]:
    merged = {**DB_RETENTION_DEFAULTS, **get_config().get("DB_RETENTION", {})}
    return {name: timedelta(seconds=float(seconds)) for name, seconds in merged.items()}


def outbox_config() -> dict[str, Any]:
    return {**OUTBOX_DEFAULTS, **get_config().get("OUTBOX", {})}
