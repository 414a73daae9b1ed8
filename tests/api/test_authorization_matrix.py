"""The authorization matrix of issue 27, generated from the URL configuration so that it cannot go stale: every
route and method (the seeds, /api/v1, /metrics, the console) times every caller, each with its expected answer
(the table: tests/api/matrix_routes.py). A route or method without a row fails, and so does a row for a route
that no longer exists.

Left out, on purpose: Django's admin (/admin/: Django's own permission checks, tested in tests/app/test_admin.py)
and static files (not views of ours; no pattern in project/urls.py serves them today)."""

import json
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
import redis
from django.test import Client as WebClient
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.urls.resolvers import RegexPattern

import tests.api.v1.tasks  # noqa: F401  (registers apitest.add and apitest.boom)
from tests.api.matrix_routes import (
    API_CALLERS,
    CONSOLE_CALLERS,
    EVIL_ORIGIN,
    LOGIN,
    MOVED,
    REMOTE_ADDR,
    ROWS,
    Expected,
    Request,
    Row,
    World,
    console_client,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db]

# Not in the matrix: Django's admin (its own permission checks and tests) and static files (no view of ours).
SKIPPED_PREFIXES = ("/admin/", "/static/")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")


# --- the routes of the URL configuration ----------------------------------------------------------------------


def _segment(pattern: Any) -> str:
    text = str(pattern)
    if isinstance(pattern, RegexPattern):
        text = text.removeprefix("^").removesuffix("$")
    return text


def url_routes() -> dict[str, Any]:
    """Every route of ROOT_URLCONF from the site's root (as its patterns spell it) -> its view."""
    found: dict[str, Any] = {}

    def walk(patterns: list[URLPattern | URLResolver], prefix: str) -> None:
        for entry in patterns:
            route = prefix + _segment(entry.pattern)
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, route)
            elif not route.startswith(SKIPPED_PREFIXES):
                found.setdefault(route, entry.callback)  # the first pattern of a route is the one that serves

    walk(get_resolver().url_patterns, "/")
    return found


def operation_methods() -> dict[str, set[str]]:
    """/api/v1's declared operations: route -> methods (one URL pattern serves every method of its path)."""
    import jobconsole_api.v1.catalogue  # noqa: F401  (declares the operations; the URL configuration may not be loaded yet)
    from jobconsole_api.v1.routing import OPERATIONS, _django_route

    methods: dict[str, set[str]] = {}
    for op in OPERATIONS:
        methods.setdefault("/api/v1/" + _django_route(op.route), set()).add(op.method)
    return methods


def expected_keys() -> set[tuple[str, str]]:
    """(method, route) pairs the table must have: /api/v1's operations' methods from their declaration; any other
    route at least one row (its methods are checked by test_a_method_without_a_row_is_refused)."""
    routes = url_routes()
    declared = operation_methods()
    assert declared, "no /api/v1 operation is declared: jobconsole_api.v1.routing.OPERATIONS is empty"
    rows_by_route: dict[str, set[str]] = {}
    for row in ROWS:
        rows_by_route.setdefault(row.route, set()).add(row.method)
    keys: set[tuple[str, str]] = set()
    for route in routes:
        for method in declared.get(route) or rows_by_route.get(route) or {"ANY"}:
            keys.add((method, route))
    return keys


ROW_BY_KEY = {row.key: row for row in ROWS}


def test_every_route_and_method_has_a_row_and_every_row_a_route() -> None:
    table = {row.key for row in ROWS}
    assert len(table) == len(ROWS), "two rows for the same method and route in tests/api/matrix_routes.py"
    wanted = expected_keys()
    missing = sorted(wanted - table)
    stale = sorted(table - wanted)
    assert not missing, (
        "Routes without a row in the authorization matrix: add a Row (the request, and each caller's answer) to "
        "ROWS in tests/api/matrix_routes.py for each of: "
        + "; ".join(f"{method if method != 'ANY' else '<its methods>'} {route}" for method, route in missing)
    )
    assert not stale, (
        "Rows of tests/api/matrix_routes.py for routes or methods the URL configuration does not have (any more):"
        " remove or correct them: " + "; ".join(f"{method} {route}" for method, route in stale)
    )


def _names_a_job(row: Row) -> bool:
    return any(
        part in row.route for part in ("<str:job_id>", "<str:task_id>", "<str:workflow_id>", "/unique", "/tasks/cancel")
    )


def test_every_row_has_an_answer_for_every_caller() -> None:
    for row in ROWS:
        if row.console:
            assert set(row.expect) == set(CONSOLE_CALLERS), (row.key, "needs the answer of each console caller")
            continue
        wanted = set(API_CALLERS) - (set() if _names_a_job(row) or row.per_owner else {"submit_other"})
        assert set(row.expect) == wanted, (row.key, "answers missing or extra", sorted(set(row.expect) ^ wanted))


# --- the cells ------------------------------------------------------------------------------------------------


@pytest.fixture
def world(settings: Any, r: "redis.Redis", redis_url: str) -> Iterator[World]:
    settings.JOBCONSOLE = {
        **settings.JOBCONSOLE,
        "REDIS_URL": redis_url,
        "MIRROR": {**settings.JOBCONSOLE.get("MIRROR", {}), "BLOCK_MS": 20},
        "API": {"ANONYMOUS_SEEDS": False},
    }
    yield World(r)


def anonymous_seeds(settings: Any, on: bool) -> None:
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "API": {**settings.JOBCONSOLE.get("API", {}), "ANONYMOUS_SEEDS": on}}


def caller_client(world: World, caller: str) -> tuple[WebClient, dict[str, str]]:
    """The test client of a caller and the extra WSGI environment of its requests."""
    if caller in CONSOLE_CALLERS:
        return console_client(caller), {}
    if caller in ("anon_prod", "anon_run"):
        return WebClient(), {"REMOTE_ADDR": "127.0.0.1"}
    if caller == "anon_remote":
        return WebClient(), {"REMOTE_ADDR": REMOTE_ADDR}
    extra = {"HTTP_ORIGIN": EVIL_ORIGIN} if caller == "cross_site" else {}
    return world.api(caller), extra


def perform(web: WebClient, request: Request, extra: dict[str, str], content_type: str | None = None) -> Any:
    client: Any = web  # (extra is the WSGI environment, which django-stubs cannot tell from the keyword arguments)
    if request.method == "GET":
        return client.get(request.path, request.query, **extra)
    path = request.path + ("?" + urlencode(request.query) if request.query else "")
    if request.form:
        return client.post(path, request.body, **extra)
    data = "" if request.body is None else json.dumps(request.body)
    send = getattr(client, request.method.lower())
    return send(path, data, content_type=content_type or "application/json", **extra)


def redis_state(r: "redis.Redis") -> dict[str, bytes | None]:
    raw: Any = redis.Redis(connection_pool=r.connection_pool)
    # DUMP answers a serialization (bytes): not decoded, whatever the connection's decode_responses.
    return {key: raw.execute_command("DUMP", key, NEVER_DECODE=True) for key in r.scan_iter(count=1000)}


def describe(expected: Expected) -> str:
    if isinstance(expected, frozenset):
        return " or ".join(str(s) for s in sorted(expected))
    return str(expected)


def assert_answer(response: Any, expected: Expected, cell: str) -> None:
    status = response.status_code
    location = response.get("Location", "")
    if expected in (LOGIN, MOVED):
        to_login = status == 302 and location.startswith(reverse("admin:login"))
        ok = to_login if expected == LOGIN else (status == 302 and not to_login)
    elif isinstance(expected, frozenset):
        ok = status in expected
    else:
        ok = status == expected
    shown = f"{status}" + (f" to {location}" if location else "")
    assert ok, f"{cell}: expected {describe(expected)}, got {shown}: {response.content[:300]!r}"


# A refused change changes nothing (policy: "403, nothing enqueued"; bad input: nothing changed).
REFUSALS: tuple[Expected, ...] = (401, 403, 404, 405, LOGIN)

CELLS = [pytest.param(row, caller, id=f"{row.method} {row.route} | {caller}") for row in ROWS for caller in row.expect]


@pytest.mark.parametrize(("row", "caller"), CELLS)
def test_cell(row: Row, caller: str, world: World, settings: Any) -> None:
    request = row.request(world, caller)  # makes the state the request needs (as the submit token)
    anonymous_seeds(settings, caller in ("anon_run", "anon_remote"))
    client, extra = caller_client(world, caller)
    expected = row.expect[caller]
    refused = request.method in UNSAFE and expected in REFUSALS
    before = redis_state(world.r) if refused else None
    response = perform(client, request, extra)
    assert_answer(response, expected, f"{row.method} {row.route} as {caller}")
    if refused:
        assert redis_state(world.r) == before, f"{row.method} {row.route} as {caller}: refused, yet Redis changed"
    if row.check is not None:
        row.check(world, caller, response)


# --- methods without a row ------------------------------------------------------------------------------------


def _probe_routes() -> list[Any]:
    """API routes (seeds, /api/v1, /metrics) with their unlisted methods; console routes that take only POST
    (Django's function views answer any method, so a GET-only console page cannot be probed for others)."""
    probes = []
    listed: dict[str, set[str]] = {}
    for row in ROWS:
        listed.setdefault(row.route, set()).add(row.method)
    for route, methods in sorted(listed.items()):
        console = all(row.console for row in ROWS if row.route == route)
        if console and methods != {"POST"}:
            continue
        for method in METHODS:
            if method not in methods:
                probes.append(pytest.param(route, method, id=f"{method} {route}"))
    return probes


@pytest.mark.parametrize(("route", "method"), _probe_routes())
def test_a_method_without_a_row_is_refused(route: str, method: str, world: World, settings: Any) -> None:
    """A method a route serves must have its row: an operate token (or the console's operator) gets 405 for every
    method the table does not list."""
    row = next(row for row in ROWS if row.route == route)
    request = row.request(world, "operate" if not row.console else "operator")
    client, extra = caller_client(world, "operate" if not row.console else "operator")
    response = perform(client, Request(method, request.path, body=None), extra)
    assert response.status_code == 405, (
        f"{method} {route} answers {response.status_code}, not 405: if it serves {method}, add a row for it to "
        "tests/api/matrix_routes.py"
    )


# --- cross-site requests change nothing -------------------------------------------------------------------------


CROSS_SITE_HEADERS = {
    "origin": {"HTTP_ORIGIN": EVIL_ORIGIN},
    "sec-fetch-site": {"HTTP_SEC_FETCH_SITE": "cross-site"},
    "origin-null": {"HTTP_ORIGIN": "null"},  # a sandboxed frame or a data: page of any site
    "other-local-port": {"HTTP_ORIGIN": "http://localhost:3000", "HTTP_SEC_FETCH_SITE": "same-site"},
}


def _unsafe_api_rows() -> list[Any]:
    return [
        pytest.param(row, how, id=f"{row.method} {row.route} | {how}")
        for row in ROWS
        if not row.console and row.method in UNSAFE and row.route != "/metrics"
        for how in CROSS_SITE_HEADERS
    ]


@pytest.mark.parametrize(("row", "how"), _unsafe_api_rows())
def test_a_cross_site_change_is_refused_and_changes_nothing(
    row: Row, how: str, world: World, settings: Any, r: "redis.Redis"
) -> None:
    """Policy 4: a page of another site posting to a seed route of `make run` (anonymous, from loopback) or to
    /api/v1 (a token a script holds) with a body that needs no preflight (text/plain) is refused, and Redis is
    exactly as it was."""
    seed_route = not row.route.startswith("/api/")
    request = row.request(world, "anon_run" if seed_route else "operate")
    anonymous_seeds(settings, seed_route)
    client = WebClient() if seed_route else world.api("operate")
    before = redis_state(r)
    response = perform(client, request, {"REMOTE_ADDR": "127.0.0.1", **CROSS_SITE_HEADERS[how]}, "text/plain")
    assert response.status_code == 403, (
        f"{row.method} {row.route} cross-site ({how}): {response.status_code} {response.content[:300]!r}"
    )
    assert redis_state(r) == before, f"{row.method} {row.route} cross-site ({how}) changed Redis"


# --- the loopback rule's edges ----------------------------------------------------------------------------------


def test_a_request_a_proxy_forwarded_is_not_anonymous_loopback(world: World, settings: Any) -> None:
    """Under `make run` a proxy on the same host makes every request come from 127.0.0.1, but says it forwarded
    it: no anonymous access then."""
    anonymous_seeds(settings, True)
    body = json.dumps({"type": "examples.echo", "payload": "x"})
    response = WebClient().post("/jobber/queue", body, content_type="application/json", REMOTE_ADDR="127.0.0.1",
                                HTTP_X_FORWARDED_FOR="198.51.100.4")  # fmt: skip
    assert response.status_code == 401, response.content[:300]


def test_metrics_anonymous_loopback_when_turned_on(world: World, settings: Any) -> None:
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "METRICS": {"ANONYMOUS_LOOPBACK": True}}
    assert WebClient().get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert WebClient().get("/metrics", REMOTE_ADDR=REMOTE_ADDR).status_code == 401


def test_a_same_origin_request_is_not_refused(world: World, settings: Any) -> None:
    """The control of the cross-site cells: the site's own origin (the console's pages) passes."""
    anonymous_seeds(settings, True)
    body = json.dumps({"type": "examples.echo", "payload": "x"})
    response = WebClient().post("/jobber/queue", body, content_type="application/json", REMOTE_ADDR="127.0.0.1",
                                HTTP_ORIGIN="http://testserver", HTTP_SEC_FETCH_SITE="same-origin")  # fmt: skip
    assert response.status_code == 201, response.content[:300]


def test_dns_rebinding_reaches_no_seed_route(world: World, settings: Any, r: "redis.Redis") -> None:
    """A page of evil.example whose name the attacker re-points at 127.0.0.1 is same-origin for the browser: the
    Host header (ALLOWED_HOSTS) is what refuses it under `make run`, before any view runs."""
    anonymous_seeds(settings, True)
    before = redis_state(r)
    body = json.dumps({"type": "examples.echo", "payload": "x"})
    response = WebClient().post("/jobber/queue", body, content_type="text/plain", REMOTE_ADDR="127.0.0.1",
                                HTTP_HOST="evil.example:8000", HTTP_ORIGIN="http://evil.example:8000")  # fmt: skip
    assert response.status_code == 400, response.content[:300]
    assert redis_state(r) == before


# --- a job submitted through a seed route is its token's own on every route -------------------------------------

SEED_SUBMISSIONS: dict[str, tuple[dict[str, Any], Callable[[Any], str]]] = {
    "/jobber/queue": ({"type": "examples.echo", "payload": "x"}, lambda body: body["job-id"]),
    "/jobs": ({"type": "examples.echo", "payload": "x"}, lambda body: body["job_id"]),
    "/jobs (Jobber's variant)": ({"jobType": "examples.echo", "payload": "x"}, lambda body: body["jobId"]),
    "/schedule/": ({"job_type": "examples.echo", "payload": "x"}, lambda body: body["job_id"]),
    "/runqueue/jobs": ({"topic": "examples.echo", "json": {"x": 1}}, lambda body: body["id"]),
    "/jobbers/submit-task": ({"name": "apitest.add", "parameters": {"a": 1}}, lambda body: body["task"]["id"]),
}


@pytest.mark.parametrize("route", list(SEED_SUBMISSIONS))
def test_a_job_submitted_through_a_seed_is_its_tokens_own(route: str, world: World) -> None:
    """The matrix's jobs are submitted through /api/v1; a seed's submission must make the job its token's too:
    the token reads it through /api/v1, another submit token gets the 404 of an unknown id."""
    body, job_id_of = SEED_SUBMISSIONS[route]
    path = route.split(" ")[0]
    response = world.api("submit").post(path, json.dumps(body), content_type="application/json")
    assert response.status_code in (200, 201, 202), response.content[:300]
    job_id = job_id_of(response.json())
    assert world.api("submit").get(f"/api/v1/jobs/{job_id}").status_code == 200
    assert world.api("submit_other").get(f"/api/v1/jobs/{job_id}").status_code == 404
