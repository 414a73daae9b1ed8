"""The console's refusal page: a 403 in the console's frame (navigation, the reason in words), not Django's bare
"403 Forbidden", so an operator refused an action sees why and where to go from there."""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.http import url_has_allowed_host_and_scheme

from dashboards.rendering import page

DEFAULT_REASON = "Your account lacks the permission this page or action needs."


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    reason = str(exception or "") or DEFAULT_REASON
    if request.path.startswith("/api/") or "json" in request.headers.get("Accept", ""):
        body = {"type": "about:blank", "title": "Forbidden", "status": 403, "detail": reason}
        return JsonResponse(body, status=403, content_type="application/problem+json")
    back = request.headers.get("Referer", "")
    if not url_has_allowed_host_and_scheme(back, {request.get_host()}, require_https=request.is_secure()):
        back = ""  # only a page of this site
    context = {"reason": reason, "back": back}
    return page(request, "dashboards/forbidden.html", "", context, status=403)
