"""Errors as RFC 9457 problem details (application/problem+json), reading JSON bodies, and the view decorator
every API route goes through: a Problem becomes its response, Redis being unreachable a 503 with Retry-After,
a method the route does not serve a 405 with Allow. API clients send no CSRF token (they authenticate with a
bearer token, not a cookie), so the routes are csrf_exempt."""

import functools
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from jobconsole.conf import api_config

log = logging.getLogger(__name__)

PROBLEM_CONTENT_TYPE = "application/problem+json"
# `type` is a URI naming the kind of problem; ours point at the API's documentation, one anchor per status.
TYPE_BASE = "/api/v1/docs#problem-"

TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    409: "Conflict",
    413: "Content Too Large",
    414: "URI Too Long",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class Problem(Exception):
    """An error a route answers with: raise it anywhere below an @api_view. `extra` becomes further members of
    the body (e.g. `errors`: a list of {"field", "message"}); `headers` are added to the response."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        title: str | None = None,
        type: str | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.title = title or TITLES.get(status, "Error")
        self.type = type or f"{TYPE_BASE}{status}"
        self.headers = headers or {}
        self.extra = extra

    def body(self, instance: str = "") -> dict[str, Any]:
        body: dict[str, Any] = {"type": self.type, "title": self.title, "status": self.status, "detail": self.detail}
        if instance:
            body["instance"] = instance
        body.update(self.extra)
        return body


def problem_response(problem: Problem, request: HttpRequest | None = None) -> JsonResponse:
    response = JsonResponse(
        problem.body(request.path if request is not None else ""),
        status=problem.status,
        content_type=PROBLEM_CONTENT_TYPE,
        json_dumps_params={"ensure_ascii": False},
    )
    for name, value in problem.headers.items():
        response.headers[name] = value
    return response


def field_error(field: str, message: str) -> dict[str, str]:
    return {"field": field, "message": message}


def invalid(detail: str, errors: Sequence[dict[str, str]] = (), status: int = 422) -> Problem:
    """A request that was well-formed JSON but whose values are wrong (422), each wrong field listed."""
    return Problem(status, detail, errors=list(errors)) if errors else Problem(status, detail)


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def read_body(request: HttpRequest) -> bytes:
    """The raw body, refused with 413 when it is larger than API.MAX_BODY_BYTES (checked before reading it)."""
    limit = api_config()["MAX_BODY_BYTES"]
    declared = request.META.get("CONTENT_LENGTH") or "0"
    try:
        length = int(declared)
    except ValueError:
        raise Problem(400, f"Content-Length {declared!r} is not a number.") from None
    if length > limit:
        raise Problem(413, f"The body has {length} bytes; the most this API reads is {limit}.")
    try:
        body = request.body
    except RequestDataTooBig:  # over Django's own DATA_UPLOAD_MAX_MEMORY_SIZE, when that is the lower limit
        raise Problem(413, f"The body is larger than the most this API reads ({limit} bytes).") from None
    if len(body) > limit:  # a length that was not declared
        raise Problem(413, f"The body has {len(body)} bytes; the most this API reads is {limit}.")
    return body


def read_json_value(request: HttpRequest, *, content_types: Callable[[str], bool] = _is_json) -> Any:
    """The body parsed as JSON, any JSON value: 413 when too large, 400 when empty, 415 unless the Content-Type
    is JSON, 400 when it does not parse (saying where)."""
    raw = read_body(request)
    if not raw.strip():
        raise Problem(400, "The body is empty; a JSON object was expected.")
    content_type = request.META.get("CONTENT_TYPE", "")
    if not content_types(content_type):
        shown = content_type or "none"
        raise Problem(415, f"The body must be JSON sent with Content-Type: application/json (it was {shown}).")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Problem(400, f"The body is not UTF-8: {exc.reason} at byte {exc.start}.") from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_refuse_duplicates)
    except json.JSONDecodeError as exc:
        raise Problem(400, f"The body is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).") from None
    except ValueError as exc:  # NaN / Infinity, a duplicate key, an integer of more than 4,300 digits
        raise Problem(400, f"The body is not valid JSON: {exc}.") from None
    except RecursionError:
        raise Problem(400, f"The body is nested more than {MAX_DEPTH} levels deep.") from None
    _check_depth_and_text(value)
    return value


MAX_DEPTH = 64  # arrays and objects inside each other; legitimate job parameters come nowhere near


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, item in pairs:
        if key in found:
            raise ValueError(f"the key {key[:50]!r} appears twice in one object")
        found[key] = item
    return found


def _check_depth_and_text(value: Any) -> None:
    """Refuse nesting deeper than MAX_DEPTH and strings that are not Unicode text (a lone surrogate escape such
    as "\\ud800" parses, but cannot be stored or encoded again). Iterative: a deep body cannot exhaust the stack."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item)
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise Problem(400, f"The body is nested more than {MAX_DEPTH} levels deep.")
            if isinstance(item, dict):
                for key, child in item.items():
                    _check_text(key)
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise Problem(400, "The body holds a lone surrogate escape (such as \\ud800): not Unicode text.") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read_json(request: HttpRequest) -> dict[str, Any]:
    """The body as a JSON object (dict): the errors of read_json_value, and 400 for any other JSON value."""
    value = read_json_value(request)
    if not isinstance(value, dict):
        raise Problem(400, f"The body must be a JSON object, not {json_type(value)}.")
    return value


def json_type(value: Any) -> str:
    """The JSON name of a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


ViewFunction = Callable[..., HttpResponse]


def redis_unavailable(exc: Exception) -> Problem:
    seconds = api_config()["RETRY_AFTER"]
    return Problem(
        503,
        f"Redis is unreachable ({exc}); nothing was changed. Try again in {seconds} seconds.",
        headers={"Retry-After": str(seconds)},
    )


def api_view(methods: Iterable[str] = ("GET",)) -> Callable[[ViewFunction], ViewFunction]:
    """Serve only `methods` (HEAD with GET; anything else 405 with Allow), answer a Problem with its problem
    response, Redis being unreachable with 503 + Retry-After. The view is csrf_exempt: API callers authenticate
    with a bearer token, which a browser never sends by itself."""
    allowed = [m.upper() for m in methods]
    if "GET" in allowed and "HEAD" not in allowed:
        allowed.append("HEAD")

    def decorate(view: ViewFunction) -> ViewFunction:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                if request.method not in allowed:
                    raise Problem(
                        405,
                        f"{request.method} is not served here; use {', '.join(allowed)}.",
                        headers={"Allow": ", ".join(allowed)},
                    )
                return view(request, *args, **kwargs)
            except Problem as problem:
                return problem_response(problem, request)
            except (redis.ConnectionError, redis.TimeoutError) as exc:  # BusyLoadingError is a ConnectionError
                log.warning("API %s %s: Redis unreachable: %s", request.method, request.path, exc)
                return problem_response(redis_unavailable(exc), request)

        return csrf_exempt(wrapper)

    return decorate
