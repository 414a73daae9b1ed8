"""Redis connections for the engine: decoded strings, timeouts, and retries that ride out short outages."""

from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry


def connect(url: str, **overrides: Any) -> "redis.Redis":
    """A pooled client for `url`. Retrying a command is safe: every engine write is idempotent or
    token-checked, and enqueue ids are generated before the first try."""
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
    return redis.Redis.from_url(url, **options)


def require_decoded(connection: "redis.Redis") -> None:
    """The engine reads replies as str; a bytes-returning client would fail in confusing places."""
    if not connection.connection_pool.connection_kwargs.get("decode_responses"):
        raise ValueError("the engine needs a Redis client created with decode_responses=True (see connect())")
