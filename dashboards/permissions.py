"""Who may do what in the console: the same permissions as the admin.

Looking needs the view permission of jobs (or their operate permission), as the admin's list does: a staff
account without it sees nothing (superusers have every permission); acting
needs `operate_<kind>` (retry, cancel, edit, resubmit, pause) and deleting needs `purge_<kind>`, where kind is
job, deadletter, queue or periodicschedule (enable, disable, run now). `operate_queue` also covers the controls
around the queues: quiet, resume and stop workers, edit flow control's limits, silence alarms. Views check on the
server; templates hide what the user may not do (`can`).

Every console view goes through `view_required`, which also marks its responses `Cache-Control: no-store` (as
the admin's pages are): pages, htmx fragments and exports show jobs' parameters and errors, which no browser or
proxy cache should keep.
"""

from collections.abc import Callable
from functools import wraps
from typing import Any, Literal

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.views.decorators.cache import never_cache

Kind = Literal["job", "deadletter", "queue", "periodicschedule"]
KINDS: tuple[Kind, ...] = ("job", "deadletter", "queue", "periodicschedule")

type View = Callable[..., HttpResponseBase]
# request.user: a User (with is_staff and has_perm) or an AnonymousUser; django-stubs types it as neither.
type UserLike = Any


def can_view(user: UserLike) -> bool:
    return bool(user.is_active and (user.has_perm("jobconsole.view_job") or user.has_perm("jobconsole.operate_job")))


def can_operate(user: UserLike, kind: Kind) -> bool:
    return bool(user.is_active and user.has_perm(f"jobconsole.operate_{kind}"))


def can_purge(user: UserLike, kind: Kind) -> bool:
    return bool(user.is_active and user.has_perm(f"jobconsole.purge_{kind}"))


def abilities(user: UserLike) -> dict[str, bool]:
    """`can.operate_job`, `can.purge_deadletter`, ... for templates."""
    out = {"view": can_view(user)}
    for kind in KINDS:
        out[f"operate_{kind}"] = can_operate(user, kind)
        out[f"purge_{kind}"] = can_purge(user, kind)
    return out


def view_required(view: View) -> View:
    """Logged in (else the login page) and allowed to look (else 403); never cached."""

    @never_cache
    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not can_view(request.user):
            raise PermissionDenied("You may not view the console: ask for the view permission of jobs.")
        return view(request, *args, **kwargs)

    return wrapped


def _requires(check: Callable[[UserLike, Kind], bool], kind: Kind, verb: str) -> Callable[[View], View]:
    def decorate(view: View) -> View:
        @view_required
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if not check(request.user, kind):
                raise PermissionDenied(f"You may not {verb} ({kind}): your account lacks that permission.")
            return view(request, *args, **kwargs)

        return wrapped

    return decorate


def operate_required(kind: Kind) -> Callable[[View], View]:
    return _requires(can_operate, kind, "operate")


def purge_required(kind: Kind) -> Callable[[View], View]:
    return _requires(can_purge, kind, "purge")
