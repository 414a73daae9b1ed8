"""The native API's operations, declared once: method, path, scope, parameters, body and responses as JSON
Schema. The same declaration routes the request, checks its parameters and body before the handler runs, and
writes the OpenAPI document (openapi.py), so the document cannot drift from what the views accept.

A handler gets a `Call` (the request, its token, the checked path and query parameters, the checked body) and
returns a `Reply`; it raises `Problem` for what the caller got wrong. Requests go through @api_view (Problem ->
problem+json, Redis down -> 503 + Retry-After, wrong method -> 405) and @token_required (401/403) first.
"""

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, path

from jobconsole.engine import get_client
from jobconsole_api.access import Caller, check_requirement, check_same_site
from jobconsole_api.auth import authenticate
from jobconsole_api.models import ApiToken
from jobconsole_api.problems import Problem, api_view, problem_response, read_json
from jobconsole_api.v1 import idempotency
from jobconsole_api.v1.schema import Schema, integral, validate

Location = Literal["path", "query"]
NO_NUL = "^[^\\u0000]*$"
MAX_FLOAT = Decimal(sys.float_info.max)


# A schema, or a function making it when asked (for limits that are settings: they may change in tests).
SchemaSource = Schema | Callable[[], Schema]


def resolve(source: SchemaSource) -> Schema:
    return source() if callable(source) else source


@dataclass(frozen=True)
class Param:
    name: str
    source: SchemaSource
    where: Location = "query"
    required: bool = False

    @property
    def schema(self) -> Schema:
        schema = resolve(self.source)
        if self.where == "query" and schema.get("type") == "string" and not validate("", schema):
            # `?name=` is a value like any other, checked against the schema: an empty filter means nothing,
            # so it is refused (400 naming it) rather than read as absent, and the document says so.
            schema = {**schema, "minLength": 1}
        if schema.get("type") == "string" and "pattern" not in schema:
            # No text we keep holds NUL (PostgreSQL cannot store it): a filter with one is refused (400 naming
            # it), not sent to the database, which would fail on it.
            schema = {**schema, "pattern": NO_NUL, "x-pattern-message": "must not contain the NUL character"}
        return schema


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Call:
    request: HttpRequest
    token: ApiToken
    params: dict[str, Any]  # path and query parameters, checked and converted
    body: Any  # the checked JSON body (None for operations without one)

    @property
    def caller(self) -> Caller:
        """The token as the access policy sees it (jobconsole_api/access.py): its scope's powers and its limits."""
        return Caller(self.token)

    @property
    def actor(self) -> str:
        return self.token.actor


Handler = Callable[[Call], Reply]


@dataclass(frozen=True)
class Response:
    description: str
    schema: Schema | None = None


@dataclass(frozen=True)
class Operation:
    method: str
    route: str  # OpenAPI style, relative to /api/v1: "/jobs/{job_id}"
    operation_id: str
    summary: str
    tag: str
    scope: str  # what the token must allow: any, read, submit or operate (jobconsole_api/access.py)
    handler: Handler
    description: str = ""
    params: tuple[Param, ...] = ()
    body_source: SchemaSource | None = None
    body_required: bool = True
    responses: dict[int, Response] = field(default_factory=dict)
    idempotent: bool = False  # takes an Idempotency-Key header
    # Reads only the database: asks Redis first anyway, so that with Redis unreachable every route answers 503
    # (a 2xx then would let a client believe the system works).
    database_only: bool = False

    @property
    def body(self) -> Schema | None:
        return None if self.body_source is None else resolve(self.body_source)


OPERATIONS: list[Operation] = []

# The longest request target (path and query string, percent-encoded) an operation reads: longer ones are a 414.
# Below gunicorn's own limit on the request line (8,190 bytes, gunicorn.conf.py), so the refusal is problem+json.
MAX_TARGET_BYTES = 8000

# Problems any operation may answer with, added to every operation's responses in the document.
COMMON_PROBLEMS = {
    400: "The request is malformed: a parameter, the JSON body or its content type is wrong.",
    401: "No valid API token (Authorization: Bearer <token>).",
    403: "The token's scope or its queue and task limits do not allow this, or a web page of another site sent "
    "the request (Origin, Sec-Fetch-Site).",
    414: f"The path and query string are longer than {MAX_TARGET_BYTES:,} bytes (percent-encoded).",
    503: "Redis is unreachable; nothing was changed. Retry after the Retry-After header's seconds.",
}


def operation(
    method: str,
    route: str,
    *,
    operation_id: str,
    summary: str,
    tag: str,
    scope: str = "operate",
    description: str = "",
    params: tuple[Param, ...] = (),
    body: SchemaSource | None = None,
    body_required: bool = True,
    responses: dict[int, Response] | None = None,
    idempotent: bool = False,
    database_only: bool = False,
) -> Callable[[Handler], Handler]:
    check_requirement(scope)

    def register(handler: Handler) -> Handler:
        OPERATIONS.append(
            Operation(
                method=method, route=route, operation_id=operation_id, summary=summary, tag=tag, scope=scope,
                handler=handler, description=description or (handler.__doc__ or "").strip(), params=params,
                body_source=body, body_required=body_required, responses=responses or {}, idempotent=idempotent,
                database_only=database_only,
            )
        )  # fmt: skip
        return handler

    return register


# --- parameters ---------------------------------------------------------------------------------------------


# A JSON number, as text: what an integer or number parameter may be written as (not "1_000", " 7" or "inf").
JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def _convert(raw: str, schema: Schema) -> Any:
    """A query or path string as the schema's type (for the validator to check); left as it is when it
    cannot be converted, so the validator names what is wrong. An integer may be written as any JSON number
    of integer value (711.0, 7e2), as JSON Schema's `integer` allows."""
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if ("integer" in kinds or "number" in kinds) and JSON_NUMBER.fullmatch(raw):
        number = Decimal(raw)
        if "integer" in kinds and number == number.to_integral_value():
            return int(number)
        if "number" in kinds and abs(number) < MAX_FLOAT:
            return float(number)
        return raw
    if "boolean" in kinds:
        lowered = raw.lower()
        return {"true": True, "1": True, "false": False, "0": False}.get(lowered, raw)
    return raw


def _read_params(op: Operation, request: HttpRequest, path_values: dict[str, str]) -> dict[str, Any]:
    errors: list[dict[str, str]] = []
    values: dict[str, Any] = {}
    known = {p.name for p in op.params if p.where == "query"}
    unknown = sorted(set(request.GET) - known)
    if unknown:
        listed = ", ".join(sorted(known)) or "none"
        raise Problem(400, f"Unknown query parameter(s): {', '.join(unknown)}. This operation takes: {listed}.")
    for param in op.params:
        if param.where == "path":
            raw: str | None = path_values.get(param.name)
        else:
            given = request.GET.getlist(param.name)
            if len(given) > 1:
                errors.append({"field": param.name, "message": "is given more than once"})
                continue
            raw = given[0] if given else None
        if raw is None:
            if param.required:
                errors.append({"field": param.name, "message": "is required"})
            elif "default" in param.schema:
                values[param.name] = param.schema["default"]
            continue
        value = _convert(raw, param.schema)
        found = validate(value, param.schema, param.name)
        if found:
            errors += found
        else:
            values[param.name] = value
    if errors:
        raise Problem(400, "The parameters are not valid: " + _sentence(errors), errors=errors)
    return values


def _sentence(errors: list[dict[str, str]]) -> str:
    shown = "; ".join(f"{e['field']} {e['message']}" for e in errors[:5])
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return shown + more + "."


def _read_body(op: Operation, request: HttpRequest) -> Any:
    schema = op.body
    # Only an empty body is no body: anything else must be JSON (even "\x0b", which str.strip would drop).
    if schema is None:
        if request.body:
            raise Problem(400, "This operation takes no body.")
        return None
    if not request.body and not op.body_required:
        return {}
    body = read_json(request)
    errors = validate(body, schema)
    if errors:
        raise Problem(422, "The body is not valid: " + _sentence(errors), errors=errors)
    return integral(body, schema)


# --- views --------------------------------------------------------------------------------------------------


def reply_response(reply: Reply) -> HttpResponse:
    if reply.status == 204:
        response = HttpResponse(status=204)
    else:
        response = JsonResponse(reply.body, status=reply.status, safe=False, json_dumps_params={"ensure_ascii": False})
    for name, value in reply.headers.items():
        response.headers[name] = value
    return response


def _check_target(request: HttpRequest) -> None:
    size = len(request.get_full_path())
    if size > MAX_TARGET_BYTES:
        raise Problem(414, f"The path and query string take {size:,} bytes; the limit is {MAX_TARGET_BYTES:,}.")


def _run(op: Operation, request: HttpRequest, path_values: dict[str, str]) -> HttpResponse:
    check_same_site(request)  # before anything is read or changed
    _check_target(request)
    token = authenticate(request, op.scope)
    if op.database_only:
        get_client().queries.ping()  # a down Redis is a 503, never a 2xx from the database alone
    params = _read_params(op, request, path_values)
    body = _read_body(op, request)
    call = Call(request=request, token=token, params=params, body=body)
    key = request.headers.get("Idempotency-Key") if op.idempotent else None
    if key is not None:
        found = validate(key, idempotency.KEY_SCHEMA, "Idempotency-Key")
        if found:
            raise Problem(400, "The Idempotency-Key header is not valid: " + _sentence(found), errors=found)
    if key is None:
        return reply_response(op.handler(call))
    return idempotency.once(token, op.operation_id, key, request.body, lambda: _answer(op, call))


def _answer(op: Operation, call: Call) -> HttpResponse:
    """The handler's reply, or its refusal, as a response (a refusal is replayed to a retry like a success)."""
    try:
        return reply_response(op.handler(call))
    except Problem as problem:
        return problem_response(problem, call.request)


def _view_for(ops: list[Operation]) -> Callable[..., HttpResponse]:
    by_method = {op.method: op for op in ops}

    @api_view(methods=list(by_method))
    def view(request: HttpRequest, **path_values: str) -> HttpResponse:
        method = "GET" if request.method == "HEAD" else str(request.method)
        return _run(by_method[method], request, path_values)

    view.__name__ = ops[0].operation_id
    return view


def _django_route(route: str) -> str:
    parts = [f"<str:{p[1:-1]}>" if p.startswith("{") else p for p in route.strip("/").split("/")]
    return "/".join(parts)


def urlpatterns() -> list[URLPattern]:
    """One URL per path, serving its methods; paths with fixed segments come before those with parameters in
    the same place (/jobs/batch before /jobs/{job_id})."""
    routes: dict[str, list[Operation]] = {}
    for op in OPERATIONS:
        routes.setdefault(op.route, []).append(op)

    def order(route: str) -> tuple[int, ...]:
        return tuple(1 if part.startswith("{") else 0 for part in route.strip("/").split("/"))

    return [
        path(_django_route(route), _view_for(ops), name=ops[0].operation_id)
        for route, ops in sorted(routes.items(), key=lambda item: order(item[0]))
    ]
