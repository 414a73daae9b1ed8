"""Writing audit records for operator actions (admin, console and shell)."""

from collections.abc import Sequence
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser

from jobconsole.models import AuditLog


def record(
    user: AbstractBaseUser | AnonymousUser | str | None,
    action: str,
    *,
    job_ids: Sequence[str] = (),
    queue: str = "",
    filter: dict[str, Any] | None = None,
    count: int | None = None,
    refused: int = 0,
    reason: str = "",
    actor: str | None = None,
    detail: dict[str, Any] | None = None,
) -> AuditLog:
    if isinstance(user, str):  # a caller that is no Django user, by its name (an API token: "api:<name>")
        actor, user = actor or user, None
    authenticated = user is not None and user.is_authenticated
    return AuditLog.objects.create(
        user=user if authenticated else None,  # type: ignore[misc]
        actor=actor or (user.get_username() if authenticated and user is not None else "anonymous"),
        action=action,
        queue=queue,
        job_ids=list(job_ids),
        filter=filter or {},
        count=len(job_ids) - refused if count is None else count,
        refused=refused,
        reason=reason,
        detail=detail or {},
    )
