"""System checks of the JOBCONSOLE settings: a typo in a key or a wrong type must not be silently ignored.

jobconsole.E001  JOBCONSOLE is not a dict
jobconsole.E002  an unknown key (at the top or in a group such as MIRROR)
jobconsole.E003  a value of the wrong type (or a PERIODIC.SCHEDULES entry that is no valid schedule)
jobconsole.E004  an environment variable that cannot be read as its setting's type
jobconsole.W001  a database whose connections are kept (CONN_MAX_AGE) without CONN_HEALTH_CHECKS: after a database
                 restart, each worker thread's next job fails once on its dead connection (and is retried)
"""

from collections.abc import Mapping, Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register

from jobconsole.conf import problems

TAG = "jobconsole"  # runworker and runrecoverer run only these checks (they must start without a database)


@register(TAG)
def check_settings(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[CheckMessage]:
    return [
        Error(message, hint=hint or None, obj="settings.JOBCONSOLE", id=f"jobconsole.{code}")
        for code, message, hint in problems()
    ]


@register(TAG)
def check_database_connections(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[CheckMessage]:
    return unchecked_reuse(settings.DATABASES)


def unchecked_reuse(databases: Mapping[str, Mapping[str, Any]]) -> list[CheckMessage]:
    """W001 for each server database whose connections outlive a job without a check before their next use."""
    return [
        Warning(
            f"database {alias!r} keeps connections (CONN_MAX_AGE={spec.get('CONN_MAX_AGE', 0)}) without "
            "CONN_HEALTH_CHECKS: after a database restart or failover, each worker thread's next job fails once on "
            "its dead connection (and is retried)",
            hint="set CONN_HEALTH_CHECKS: True (dj-database-url: conn_health_checks=True); see docs/production.md",
            obj=f"settings.DATABASES[{alias!r}]",
            id="jobconsole.W001",
        )
        for alias, spec in databases.items()
        if not str(spec.get("ENGINE", "")).endswith("sqlite3")
        and spec.get("CONN_MAX_AGE", 0) != 0
        and not spec.get("CONN_HEALTH_CHECKS", False)
    ]
