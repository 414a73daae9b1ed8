"""Whether Redis takes writes, found the way a submission finds it: one small SET.

A submission is refused when Redis denies a write: out of memory under `noeviction` (OOM), unable to persist
(MISCONF: RDB snapshots or AOF writes failing with `stop-writes-on-bgsave-error`), a read-only replica (READONLY:
the client still points at a former primary after a failover), or too few replicas (NOREPLICAS under
`min-replicas-to-write`). Each of these refuses a plain SET exactly when it refuses an enqueue script, so the
probe is a SET with a short expiry on one key of Jobconsole's namespace (`keys.HEALTH_PROBE`, one Cluster slot):
one round trip, nothing left behind. Only when Redis refuses is INFO read, to say why in figures."""

from dataclasses import dataclass
from typing import Any

import redis

from jobconsole.core import cluster, keys

PROBE_TTL_MS = 10_000

OOM = "oom"
MISCONF = "misconf"
READONLY = "readonly"
NOREPLICAS = "noreplicas"
OTHER = "other"


@dataclass(frozen=True, slots=True)
class WriteRefusal:
    kind: str  # OOM, MISCONF, READONLY, NOREPLICAS or OTHER
    error: str  # Redis's own words, with its error code first
    detail: str  # what INFO says about the cause ("" when INFO could not be read)


def refusal_kind(exc: redis.ResponseError) -> str:
    """The kind of a write refusal, from redis-py's exception class or Redis's error code."""
    if isinstance(exc, redis.exceptions.OutOfMemoryError):
        return OOM
    if isinstance(exc, redis.exceptions.ReadOnlyError):
        return READONLY
    code = str(exc).split(" ", 1)[0]
    return {"OOM": OOM, "MISCONF": MISCONF, "READONLY": READONLY, "NOREPLICAS": NOREPLICAS}.get(code, OTHER)


def error_text(exc: redis.ResponseError, kind: str) -> str:
    """Redis's error with its code first (redis-py strips the code of the errors it has a class for)."""
    text = str(exc).strip()
    code = {OOM: "OOM", READONLY: "READONLY"}.get(kind)
    if code and not text.startswith(code):
        text = f"{code} {text}"
    return text


def probe_writes(connection: "redis.Redis") -> WriteRefusal | None:
    """None when Redis took the probe's write; what refused it otherwise. Connection errors propagate."""
    try:
        connection.set(keys.HEALTH_PROBE, "1", px=PROBE_TTL_MS)
    except redis.ResponseError as exc:
        kind = refusal_kind(exc)
        return WriteRefusal(kind, error_text(exc, kind), _detail(connection, kind))
    return None


def _detail(connection: "redis.Redis", kind: str) -> str:
    section = {OOM: "memory", MISCONF: "persistence", READONLY: "replication", NOREPLICAS: "replication"}.get(kind)
    if section is None:
        return ""
    try:
        info = _info(connection, section)
    except redis.RedisError:
        return ""
    if kind == OOM:
        return memory_detail(info)
    if kind == MISCONF:
        return persistence_detail(info)
    return replication_detail(info)


def _info(connection: "redis.Redis", section: str) -> dict[str, Any]:
    """INFO of the node that holds the probe's key (in a Cluster, the shard that refused)."""
    if cluster.is_cluster(connection):
        node = connection.get_node_from_key(keys.HEALTH_PROBE)  # type: ignore[no-untyped-call]
        reply = connection.info(section, target_nodes=node)
        if reply and all(isinstance(v, dict) for v in reply.values()):
            return dict(next(iter(reply.values())))
        return dict(reply)
    return dict(connection.info(section))


def size(n: int) -> str:
    """Bytes as INFO's human figures say them: 900 B, 12 KB, 1.2 MB, 12 MB, 3.5 GB."""
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{n} B"


def memory_detail(info: dict[str, Any]) -> str:
    used, limit = int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))
    policy = info.get("maxmemory_policy", "?")
    return f"used {size(used)} of {size(limit)}, maxmemory-policy {policy}"


def persistence_detail(info: dict[str, Any]) -> str:
    failing = []
    if info.get("rdb_last_bgsave_status") == "err":
        failing.append("RDB snapshots failing (rdb_last_bgsave_status: err)")
    if info.get("aof_last_write_status") == "err" or info.get("aof_last_bgrewrite_status") == "err":
        failing.append("AOF writes failing")
    return "; ".join(failing) or "persistence failing"


def replication_detail(info: dict[str, Any]) -> str:
    role = info.get("role", "?")
    if role == "slave":
        link = info.get("master_link_status", "?")
        return f"role: slave of {info.get('master_host', '?')}:{info.get('master_port', '?')}, link {link}"
    if "min_slaves_good_slaves" in info:
        return f"role: {role}, {info['min_slaves_good_slaves']} good replica(s) of {info.get('connected_slaves', 0)}"
    return f"role: {role}"
