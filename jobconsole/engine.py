"""Engine objects built from the Django settings: the Redis connection and the client (one per process)."""

from functools import cache
from typing import Any

import redis
from django.core.signals import setting_changed

from jobconsole.conf import get_config, retention
from jobconsole.core import Client, JobState, default_registry
from jobconsole.core.connection import connect
from jobconsole.core.groups import Group


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
        finished_ttl=retention()[JobState.COMPLETED],
        spin_us=config["CLIENT_SPIN_US"],
        replicas=config["ENQUEUE_REPLICAS"],
        replicas_timeout=config["ENQUEUE_REPLICAS_TIMEOUT"],
    )


def define_flow_control() -> None:
    """Write the settings' concurrency groups and queue limits to Redis (every runworker does, at start)."""
    config, client = get_config(), get_client()
    for name, spec in config["GROUPS"].items():
        client.define_group(Group.parse(name, spec))
    for queue, limit in config["QUEUE_LIMITS"].items():
        client.set_queue_limit(queue, limit)


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    """A changed JOBCONSOLE (tests do it) may name another Redis: build the connection and client afresh."""
    if setting == "JOBCONSOLE":
        get_redis.cache_clear()
        get_client.cache_clear()


setting_changed.connect(_settings_changed, dispatch_uid="jobconsole.engine")
