"""Bearer-token authentication for the API: `Authorization: Bearer <token>`, scoped read, submit or operate
(what each may do: jobconsole_api/access.py). Puts the caller on the request for the routes' checks."""

import functools
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from jobconsole.conf import api_config
from jobconsole_api.access import CHALLENGE, Caller, check_requirement, from_loopback
from jobconsole_api.models import ApiToken, hash_token
from jobconsole_api.problems import Problem

# last_used_at is written at most this often per token, so reads do not each cost a database write.
LAST_USED_EVERY = timedelta(minutes=1)


def _unauthorized(detail: str, error: str = "invalid_token") -> Problem:
    return Problem(401, detail, headers={"WWW-Authenticate": f'{CHALLENGE}, error="{error}"'})


def bearer_token(request: HttpRequest) -> str | None:
    header: str = request.META.get("HTTP_AUTHORIZATION", "")
    if not header:
        return None
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        raise _unauthorized("The Authorization header must be 'Bearer <token>'.", "invalid_request")
    return credentials.strip()


def authenticate(request: HttpRequest, scope: str) -> ApiToken:
    """The caller's token, which meets `scope` (any, read, submit, operate): 401 without a valid one, 403 when
    its scope is too small."""
    check_requirement(scope)
    plain = bearer_token(request)
    if plain is None:
        raise Problem(
            401,
            "This route needs an API token: send 'Authorization: Bearer <token>' (create one in the admin or "
            "with `manage.py apitoken create`).",
            headers={"WWW-Authenticate": CHALLENGE},
        )
    token: ApiToken | None = ApiToken.objects.filter(secret_hash=hash_token(plain)).first()
    if token is None:
        raise _unauthorized("The API token is not valid.")
    if not token.is_active:
        raise _unauthorized("The API token was revoked.")
    Caller(token).require(scope)
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def seed_caller(request: HttpRequest, scope: str) -> Caller:
    """A seed route's caller: its token, or, with API.ANONYMOUS_SEEDS on, nobody, when it sends no Authorization
    header from the loopback address and no proxy forwarded it (anonymous access is the development stack's
    switch: never an open door for other hosts). A token that is sent is always checked."""
    if api_config()["ANONYMOUS_SEEDS"] and not request.META.get("HTTP_AUTHORIZATION"):
        if not from_loopback(request):
            raise Problem(
                401,
                "This route needs an API token: anonymous access (API.ANONYMOUS_SEEDS) answers only on loopback "
                "(127.0.0.1 or ::1, not through a proxy). Send 'Authorization: Bearer <token>'.",
                headers={"WWW-Authenticate": CHALLENGE},
            )
        return Caller(None)
    return Caller(authenticate(request, scope))


ViewFunction = Callable[..., HttpResponse]


def token_required(scope: str, *, seed: bool = False) -> Callable[[ViewFunction], ViewFunction]:
    """Authenticate before the view runs and put the caller on the request (`request_caller`). Put it below
    @api_view, which turns the 401/403 into responses. A seed route (seed=True) lets callers without an
    Authorization header in when API.ANONYMOUS_SEEDS is on, from loopback only (seed_caller)."""
    check_requirement(scope)

    def decorate(view: ViewFunction) -> ViewFunction:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            caller = seed_caller(request, scope) if seed else Caller(authenticate(request, scope))
            request.api_caller = caller  # type: ignore[attr-defined]
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def request_caller(request: HttpRequest) -> Caller:
    """The caller @token_required put on the request."""
    caller: Caller = request.api_caller  # type: ignore[attr-defined]
    return caller


def request_token(request: HttpRequest) -> ApiToken | None:
    """The caller's token (None: an anonymous seed caller)."""
    caller: Caller | None = getattr(request, "api_caller", None)
    return caller.token if caller is not None else None


def actor(request: HttpRequest) -> str:
    """How the audit log names the caller of an API route."""
    return request_caller(request).actor
