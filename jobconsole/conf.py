"""The one accessor for the JOBCONSOLE settings dict, with defaults."""

from functools import cache
from typing import Any

from django.conf import settings

from jobconsole.core.client import DEFAULT_SPIN_US

DEFAULTS: dict[str, Any] = {
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "TASK_MODULES": ["jobconsole.examples"],
    "STRICT_ENQUEUE": True,
    "CLIENT_SPIN_US": DEFAULT_SPIN_US,
    "EVENTS_MAXLEN": 100_000,
    "WORKER_CONCURRENCY": 10,
    "SHUTDOWN_GRACE": 10.0,
    "RETENTION": {},
}


@cache
def get_config() -> dict[str, Any]:
    return {**DEFAULTS, **getattr(settings, "JOBCONSOLE", {})}
