"""The OpenAPI 3.1 document of /api/v1, built from the operations' declarations (routing.OPERATIONS): the schemas
in it are the ones the views validate with."""

from typing import Any

from jobconsole_api.problems import TITLES
from jobconsole_api.v1.catalogue import OPERATIONS
from jobconsole_api.v1.idempotency import KEY_SCHEMA, MAX_KEY
from jobconsole_api.v1.routing import COMMON_PROBLEMS, Operation
from jobconsole_api.v1.schema import Schema
from jobconsole_api.v1.shapes import SCHEMAS

TITLE = "Jobconsole API"
VERSION = "1.0.0"
DESCRIPTION = (
    "Submit jobs and operate the queues: everything the console does, as JSON. Every request needs an API token "
    "(`Authorization: Bearer <token>`; create one in the admin or with `manage.py apitoken create`). A read "
    "token reads everything and changes nothing; a submit token submits jobs and sees, cancels, edits and deletes "
    "only its own (another's job is a 404); an operate token does everything. A token limited to queues or tasks "
    "reaches nothing outside them. Each operation's `x-scope` says what it needs: `any` (any valid token), "
    "`read`, `submit` or `operate` (operate includes read and submit). Cross-site requests (an `Origin` of another "
    "site, `Sec-Fetch-Site: cross-site`) are refused. Errors are RFC 9457 problem details "
    "(`application/problem+json`)."
)
# What each operation's scope asks of the token (jobconsole_api/access.py).
SCOPE_MEANING = {
    "any": "any valid token; a submit token sees only its own jobs",
    "read": "a read or operate token",
    "submit": "a submit or operate token; a submit token acts only on the jobs it submitted",
    "operate": "an operate token",
}
PROBLEM: Schema = {
    "type": "object",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "instance": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
                "required": ["field", "message"],
            },
        },
    },
    "required": ["type", "title", "status", "detail"],
}
IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": f"Any unique string of 1 to {MAX_KEY} visible ASCII characters (spaces only between them): "
    "the same key with the same request replays the first response; with another request it is a 422.",
    "schema": KEY_SCHEMA,
}


def _parameters(op: Operation) -> list[dict[str, Any]]:
    out = []
    for param in op.params:
        schema = param.schema
        entry: dict[str, Any] = {"name": param.name, "in": param.where, "required": param.where == "path" or
                                 param.required, "schema": schema}  # fmt: skip
        if "description" in schema:
            entry["description"] = schema["description"]
        out.append(entry)
    if op.idempotent:
        out.append(IDEMPOTENCY_KEY)
    return out


def _responses(op: Operation) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for status, response in sorted(op.responses.items()):
        entry: dict[str, Any] = {"description": response.description}
        if status < 400 and response.schema is not None:
            entry["content"] = {"application/json": {"schema": response.schema}}
        elif status >= 400:
            entry["content"] = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
        out[str(status)] = entry
    problems = dict(COMMON_PROBLEMS)
    if op.body is not None:
        problems.setdefault(413, "The body is larger than API.MAX_BODY_BYTES.")
        problems.setdefault(415, "The body is not sent as application/json.")
        problems.setdefault(422, "The body does not fit the schema; `errors` names each wrong field.")
    for status, description in problems.items():
        out.setdefault(str(status), {
            "description": description,
            "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
        })  # fmt: skip
    return dict(sorted(out.items()))


def _operation(op: Operation) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "operationId": op.operation_id,
        "summary": op.summary,
        "description": f"{op.description}\n\nScope: `{op.scope}` ({SCOPE_MEANING[op.scope]}).",
        "tags": [op.tag],
        "security": [{"bearer": []}],
        "x-scope": op.scope,
        "parameters": _parameters(op),
        "responses": _responses(op),
    }
    body = op.body
    if body is not None:
        entry["requestBody"] = {"required": op.body_required, "content": {"application/json": {"schema": body}}}
    return entry


def document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.route, {})[op.method.lower()] = _operation(op)
    return {
        "openapi": "3.1.0",
        "info": {"title": TITLE, "version": VERSION, "description": DESCRIPTION},
        "servers": [{"url": "/api/v1"}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": {**SCHEMAS, "Problem": PROBLEM},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "an API token"}},
        },
        "tags": [{"name": tag} for tag in dict.fromkeys(op.tag for op in OPERATIONS)],
        "x-problem-titles": {str(k): v for k, v in TITLES.items()},
    }
