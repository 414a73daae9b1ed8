"""Redis Sentinel: a `REDIS_URL` naming a primary that Sentinels watch and fail over.

    redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db][?sentinel_password=...]

(`rediss+sentinel://` for TLS to the primary and its replicas). The hosts are the Sentinels, `service` the name
they monitor (`sentinel monitor <service> ...` in their configuration), `db` the database number (0). The
password, in the URL or as `?password=`, is the primary's; `sentinel_password` is the Sentinels' own, when
they require one (`requirepass` in a Sentinel's configuration).

Every connection of such a client asks a Sentinel for the primary's address when it (re)connects (redis-py's
`SentinelConnectionPool`), so after a failover the next command of every process (worker, web, mirror) reaches
the new primary by itself; commands sent in between fail with a connection error, as in any outage. A connection
still open to a demoted primary gets READONLY on its next write, and redis-py turns that into a connection error
too, so that it reconnects.
"""

from dataclasses import dataclass
from typing import Any, TypeGuard
from urllib.parse import unquote

import redis
from redis.connection import SSLConnection
from redis.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection

from jobconsole.core import hosts_url

SCHEMES = ("redis+sentinel", "rediss+sentinel")
SENTINEL_TIMEOUT_S = 2.0  # to connect to one Sentinel and have its answer; the next one is asked after that


class FollowingConnection(SentinelManagedConnection):
    """A Sentinel-managed connection that asks the Sentinels for the primary whenever it reconnects. redis-py's
    reconnects on its own in `send_packed_command`, to the address it had, when it is used again after a
    disconnect without going back through its pool; core/wire.py keeps a connection per thread and does just
    that after a connection error, so without this it would knock on the dead primary forever."""

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self._sock:
            self.connect()  # type: ignore[no-untyped-call]  # asks the Sentinels for the primary, then connects
        super().send_packed_command(command, check_health)  # type: ignore[no-untyped-call]


class FollowingSSLConnection(FollowingConnection, SSLConnection):
    pass


@dataclass(frozen=True)
class SentinelTarget:
    """What a `redis+sentinel://` URL says."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    password: str | None = None
    username: str | None = None
    sentinel_password: str | None = None
    ssl: bool = False


def is_sentinel_url(url: str) -> bool:
    return url.partition("://")[0].lower() in SCHEMES


def parse_url(url: str) -> SentinelTarget:
    """The parts of a `redis+sentinel://` URL; ValueError says what is wrong."""
    form = "Sentinel (redis+sentinel://host:port[,host:port]/service[/db])"
    parts = hosts_url.parse(url, SCHEMES, form, "Sentinel", ("password", "sentinel_password"))
    path = [p for p in parts.path.split("/") if p]
    if not path or len(path) > 2:
        raise ValueError(f"{url!r}: the path is /service or /service/db")
    if len(path) == 2 and not path[1].isdigit():
        raise ValueError(f"{url!r}: the database number must be a whole number, not {path[1]!r}")
    return SentinelTarget(
        sentinels=parts.hosts, service=unquote(path[0]), db=int(path[1]) if len(path) == 2 else 0,
        password=parts.params.get("password", parts.password), username=parts.username,
        sentinel_password=parts.params.get("sentinel_password"), ssl=parts.scheme == SCHEMES[1],
    )  # fmt: skip


def primary(url: str, options: dict[str, Any]) -> "redis.Redis":
    """A client of the primary `url` names, with the connection `options` (connection.connect's)."""
    target = parse_url(url)
    timeout = min(SENTINEL_TIMEOUT_S, options.get("socket_connect_timeout") or SENTINEL_TIMEOUT_S)
    sentinel_kwargs: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    if target.sentinel_password:
        sentinel_kwargs["password"] = target.sentinel_password
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call]
    extra: dict[str, Any] = {"db": target.db, "password": target.password, "username": target.username}
    extra["connection_class"] = FollowingSSLConnection if target.ssl else FollowingConnection
    client: redis.Redis = sentinel.master_for(target.service, **{**options, **extra})  # type: ignore[no-untyped-call]
    return client


def is_sentinel_pool(pool: object) -> TypeGuard[SentinelConnectionPool]:
    return isinstance(pool, SentinelConnectionPool)


def pool_like(pool: SentinelConnectionPool, kwargs: dict[str, Any]) -> SentinelConnectionPool:
    """A new pool following the same Sentinels and service as `pool`, its connections made with `kwargs`."""
    kwargs = {k: v for k, v in kwargs.items() if k != "connection_pool"}  # `pool`'s own proxy, not ours
    return SentinelConnectionPool(  # type: ignore[no-untyped-call]
        pool.service_name, pool.sentinel_manager, is_master=pool.is_master,
        check_connection=pool.check_connection, connection_class=pool.connection_class, **kwargs,
    )  # fmt: skip
