"""System checks of the JOBCONSOLE settings: a typo in a key or a wrong type must not be silently ignored.

jobconsole.E001  JOBCONSOLE is not a dict
jobconsole.E002  an unknown key (at the top or in a group such as MIRROR)
jobconsole.E003  a value of the wrong type (or a PERIODIC.SCHEDULES entry that is no valid schedule)
jobconsole.E004  an environment variable that cannot be read as its setting's type
"""

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import CheckMessage, Error, register

from jobconsole.conf import problems

TAG = "jobconsole"  # runworker and runrecoverer run only these checks (they must start without a database)


@register(TAG)
def check_settings(app_configs: Sequence[AppConfig] | None = None, **kwargs: Any) -> list[CheckMessage]:
    return [
        Error(message, hint=hint or None, obj="settings.JOBCONSOLE", id=f"jobconsole.{code}")
        for code, message, hint in problems()
    ]
