"""The console's refusal page: a 403 in the console's frame (navigation, the reason in words), not Django's bare
"403 Forbidden", so an operator refused an action sees why and where to go from there.

A refusal is an expected answer, not a fault: it is logged as one WARNING line naming the request, the user and
the reason, with no traceback. (Left to Django, the request logger logs the PermissionDenied with its
traceback, and with DEBUG on Django's own console handler prints it a second time.)"""

import logging

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import add_never_cache_headers
from django.utils.http import url_has_allowed_host_and_scheme

from dashboards.rendering import page

log = logging.getLogger(__name__)

DEFAULT_REASON = "Your account lacks the permission this page or action needs."


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    reason = str(exception or "") or DEFAULT_REASON
    response = _refusal(request, reason)
    add_never_cache_headers(response)  # like every console page (dashboards/permissions.py)
    _log_refusal(request, reason, response)
    return response


def _refusal(request: HttpRequest, reason: str) -> HttpResponse:
    if request.path.startswith("/api/") or "json" in request.headers.get("Accept", ""):
        body = {"type": "about:blank", "title": "Forbidden", "status": 403, "detail": reason}
        return JsonResponse(body, status=403, content_type="application/problem+json")
    back = request.headers.get("Referer", "")
    if not url_has_allowed_host_and_scheme(back, {request.get_host()}, require_https=request.is_secure()):
        back = ""  # only a page of this site
    context = {"reason": reason, "back": back}
    return page(request, "dashboards/forbidden.html", "", context, status=403)


def _log_refusal(request: HttpRequest, reason: str, response: HttpResponse) -> None:
    user = getattr(request, "user", None)
    who = f"user {user.get_username()}" if user is not None and user.is_authenticated else "an anonymous user"
    log.warning("refused %s %s to %s: %s", request.method, _one_line(request.path), who, reason)
    # django.utils.log.log_response, which Django calls for this response next, skips a response marked logged.
    response._has_been_logged = True  # type: ignore[attr-defined]


def _one_line(text: str) -> str:
    """The path as one log line: a %0A in a URL must not start a line of its own."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
