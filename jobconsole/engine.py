"""Engine objects built from the Django settings: the Redis connection and the client (one per process)."""

from functools import cache

import redis

from jobconsole.conf import get_config, retention
from jobconsole.core import Client, default_registry
from jobconsole.core.connection import connect


@cache
def get_redis() -> "redis.Redis":
    return connect(get_config()["REDIS_URL"])


@cache
def get_client() -> Client:
    config = get_config()
    return Client(
        get_redis(),
        default_registry,
        strict=config["STRICT_ENQUEUE"],
        events_maxlen=config["EVENTS_MAXLEN"],
        finished_ttl=retention().completed,
        spin_us=config["CLIENT_SPIN_US"],
    )
