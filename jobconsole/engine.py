"""Engine objects built from the Django settings: the Redis connection and the client (one per process)."""

from functools import cache
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from jobconsole.conf import get_config
from jobconsole.core import Client, default_registry
from jobconsole.core.maintenance import Retention


def connect(url: str, **overrides: Any) -> "redis.Redis":
    """A connection pool that rides out short Redis restarts (every engine call is safe to repeat)."""
    options: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": 10,
        "socket_connect_timeout": 5,
        "health_check_interval": 30,
        "retry": Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=3),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
        **overrides,
    }
    return redis.Redis.from_url(url, **options)


@cache
def get_redis() -> "redis.Redis":
    return connect(get_config()["REDIS_URL"])


def retention() -> Retention:
    return Retention(**get_config()["RETENTION"])


@cache
def get_client() -> Client:
    config = get_config()
    return Client(
        get_redis(),
        default_registry,
        strict=config["STRICT_ENQUEUE"],
        events_maxlen=config["EVENTS_MAXLEN"],
        finished_ttl=retention().completed,
    )
