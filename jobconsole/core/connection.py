"""Redis connections for the engine: decoded strings, timeouts, and retries that ride out short outages.
A `redis+sentinel://` URL names a primary that Redis Sentinel fails over (core/sentinel.py); a `redis+cluster://`
URL the nodes of a Redis Cluster (core/cluster.py)."""

from typing import Any

import redis
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.retry import Retry

from jobconsole.core import cluster, sentinel


def connect(url: str, **overrides: Any) -> "redis.Redis":
    """A pooled client for `url` that retries commands after a connection error. That is safe for the
    producer and operator calls (enqueue ids are generated before the first try; the other writes are
    idempotent or state-checked); workers use `without_retries` instead."""
    options: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": 10,
        "socket_connect_timeout": 5,
        "socket_keepalive": True,
        "health_check_interval": 30,
        "retry": Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=3),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
        **overrides,
    }
    if sentinel.is_sentinel_url(url):
        return sentinel.primary(url, options)
    if cluster.is_cluster_url(url):
        return cluster.connect(url, options)
    return redis.Redis.from_url(url, **options)


def without_retries(connection: "redis.Redis") -> "redis.Redis":
    """A client on the same server that never re-sends a command by itself. The worker needs this:
    a claim is not safe to repeat blindly, so the worker handles connection errors itself."""
    if cluster.is_cluster(connection):
        return cluster.without_retries(connection)
    pool = connection.connection_pool
    kwargs = {**pool.connection_kwargs, "retry": Retry(NoBackoff(), 0), "retry_on_error": []}
    if sentinel.is_sentinel_pool(pool):  # a pool of its own that follows the same Sentinels
        return redis.Redis(connection_pool=sentinel.pool_like(pool, kwargs))
    return redis.Redis(connection_pool=redis.ConnectionPool(connection_class=pool.connection_class, **kwargs))


def require_decoded(connection: "redis.Redis") -> None:
    """The engine reads replies as str; a bytes-returning client would fail in confusing places."""
    if cluster.is_cluster(connection):
        if not cluster.decodes(connection):
            raise ValueError("the engine needs a Redis client created with decode_responses=True (see connect())")
        return
    if not connection.connection_pool.connection_kwargs.get("decode_responses"):
        raise ValueError("the engine needs a Redis client created with decode_responses=True (see connect())")
