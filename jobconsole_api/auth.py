"""Bearer-token authentication for the API: `Authorization: Bearer <token>`, scoped submit or operate."""

import functools
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from jobconsole.conf import api_config
from jobconsole_api.models import INCLUDES, ApiToken, hash_token
from jobconsole_api.problems import Problem

# last_used_at is written at most this often per token, so reads do not each cost a database write.
LAST_USED_EVERY = timedelta(minutes=1)
CHALLENGE = 'Bearer realm="jobconsole"'


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
    """The caller's token, which allows `scope`: 401 without a valid one, 403 when its scope is too small."""
    if scope not in INCLUDES:
        raise ValueError(f"unknown scope {scope!r}")
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
    if not token.allows(scope):
        raise Problem(
            403,
            f"The token {token.prefix}… has the scope {token.scope!r}; this route needs {scope!r}.",
            headers={"WWW-Authenticate": f'{CHALLENGE}, error="insufficient_scope", scope="{scope}"'},
        )
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


ViewFunction = Callable[..., HttpResponse]


def token_required(scope: str, *, seed: bool = False) -> Callable[[ViewFunction], ViewFunction]:
    """Authenticate before the view runs and put the token on `request.api_token` (None for an anonymous caller).
    Put it below @api_view, which turns the 401/403 into responses. A seed route (seed=True) lets callers without
    an Authorization header in when API.ANONYMOUS_SEEDS is on; a token they do send is still checked."""
    if scope not in INCLUDES:
        raise ValueError(f"unknown scope {scope!r}")

    def decorate(view: ViewFunction) -> ViewFunction:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            token: ApiToken | None
            if seed and api_config()["ANONYMOUS_SEEDS"] and not request.META.get("HTTP_AUTHORIZATION"):
                token = None
            else:
                token = authenticate(request, scope)
            request.api_token = token  # type: ignore[attr-defined]
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def request_token(request: HttpRequest) -> ApiToken | None:
    """The token @token_required put on the request (None: an anonymous seed caller)."""
    token: ApiToken | None = getattr(request, "api_token", None)
    return token


def actor(request: HttpRequest) -> str:
    """How the audit log names the caller of an API route."""
    token = request_token(request)
    return token.actor if token is not None else "api:anonymous"
