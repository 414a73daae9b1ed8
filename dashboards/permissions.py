"""Who may do what in the console: the same permissions as the admin.

Looking needs a staff account with the view permission of what is shown (or the operate permission); acting
needs `operate_<kind>` (retry, cancel, edit, resubmit, pause) and deleting needs `purge_<kind>`, where kind is
job, deadletter or queue. Views check on the server; templates hide what the user may not do (`can`).
"""

from collections.abc import Callable
from functools import wraps
from typing import Any, Literal

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

Kind = Literal["job", "deadletter", "queue"]
KINDS: tuple[Kind, ...] = ("job", "deadletter", "queue")

type View = Callable[..., HttpResponse]


def can_view(user: AbstractBaseUser | AnonymousUser) -> bool:
    return bool(user.is_active and (user.is_staff or user.has_perm("jobconsole.view_job")))


def can_operate(user: AbstractBaseUser | AnonymousUser, kind: Kind) -> bool:
    return bool(user.is_active and user.has_perm(f"jobconsole.operate_{kind}"))


def can_purge(user: AbstractBaseUser | AnonymousUser, kind: Kind) -> bool:
    return bool(user.is_active and user.has_perm(f"jobconsole.purge_{kind}"))


def abilities(user: AbstractBaseUser | AnonymousUser) -> dict[str, bool]:
    """`can.operate_job`, `can.purge_deadletter`, ... for templates."""
    out = {"view": can_view(user)}
    for kind in KINDS:
        out[f"operate_{kind}"] = can_operate(user, kind)
        out[f"purge_{kind}"] = can_purge(user, kind)
    return out


def view_required(view: View) -> View:
    """Logged in (else the login page) and allowed to look (else 403)."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not can_view(request.user):
            raise PermissionDenied("You may not view the console: ask for staff access or the view permission.")
        return view(request, *args, **kwargs)

    return wrapped


def _requires(
    check: Callable[[AbstractBaseUser | AnonymousUser, Kind], bool], kind: Kind, verb: str
) -> Callable[[View], View]:
    def decorate(view: View) -> View:
        @view_required
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not check(request.user, kind):
                raise PermissionDenied(f"You may not {verb} ({kind}): your account lacks that permission.")
            return view(request, *args, **kwargs)

        return wrapped

    return decorate


def operate_required(kind: Kind) -> Callable[[View], View]:
    return _requires(can_operate, kind, "operate")


def purge_required(kind: Kind) -> Callable[[View], View]:
    return _requires(can_purge, kind, "purge")
