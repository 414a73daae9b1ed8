"""What the seed interfaces share: the view decorator that answers errors in each seed's own format (and applies
the access policy, jobconsole_api/access.py), reading a seed's JSON body, submitting a job, and reading jobs
back as the caller may see them."""

import functools
import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import redis
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from jobconsole.core import Client
from jobconsole.core.errors import DuplicateJob, InvalidJob, JobNotFound, JobStateConflict, NotReplicated, RedisFull
from jobconsole.core.job import Job
from jobconsole.engine import get_client
from jobconsole_api.access import Caller, check_same_site
from jobconsole_api.auth import request_caller, token_required
from jobconsole_api.problems import Problem, problem_response, read_json_value, redis_unavailable

log = logging.getLogger(__name__)

# How a seed answered an error: (status, message) -> response.
ErrorStyle = Callable[[int, str], HttpResponse]
ViewFunction = Callable[..., HttpResponse]


class SeedError(Exception):
    """An error a seed route answers in its seed's own format (raise it below @seed_view)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class SeedResponse(Exception):
    """A finished error response (for bodies richer than a message, such as FastAPI's 422 list)."""

    def __init__(self, response: HttpResponse) -> None:
        super().__init__(response.status_code)
        self.response = response


def plain_text(status: int, message: str) -> HttpResponse:
    """Go's http.Error: the message and a newline as text/plain (Jobber, the Go scheduler, Walrus)."""
    response = HttpResponse(message + "\n", status=status, content_type="text/plain; charset=utf-8")
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def fastapi_detail(status: int, message: str) -> HttpResponse:
    """FastAPI's HTTPException body, {"detail": message} (Jobbers)."""
    return JsonResponse({"detail": message}, status=status, json_dumps_params={"ensure_ascii": False})


def as_problem(status: int, message: str) -> HttpResponse:
    """problem+json, for a seed that had no HTTP error format of its own (Runqueue)."""
    return problem_response(Problem(status, message))


def seed_view(
    methods: Iterable[str], *, scope: str | None, style: ErrorStyle, method_message: str | None = None
) -> Callable[[ViewFunction], ViewFunction]:
    """A seed route: refuses cross-site requests (403, before anything is read; not health probes), serves
    `methods` (405 with Allow otherwise), authenticates (`scope`: any, read, submit or operate, the token's scope
    must meet it; nobody, from loopback only, when API.ANONYMOUS_SEEDS is on; None: open, for health probes), and
    answers errors in the seed's `style`: a SeedError and the engine's refusals (InvalidJob 400, JobNotFound 404,
    JobStateConflict and DuplicateJob 409) as that seed did. Authentication, authorization, size and content-type
    refusals are problem+json (the seeds had none of them), and so is Redis being unreachable or full: 503 with
    Retry-After."""
    allowed = [m.upper() for m in methods]
    if "GET" in allowed and "HEAD" not in allowed:
        allowed.append("HEAD")

    def decorate(view: ViewFunction) -> ViewFunction:
        inner = token_required(scope, seed=True)(view) if scope is not None else view

        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if scope is not None:  # a health probe is open to every caller
                try:
                    check_same_site(request)
                except Problem as problem:
                    return problem_response(problem, request)
            if request.method not in allowed:
                response = style(
                    405, method_message or f"Method {request.method} not allowed; use {', '.join(allowed)}"
                )
                response.headers["Allow"] = ", ".join(allowed)
                return response
            try:
                return inner(request, *args, **kwargs)
            except SeedError as exc:
                return style(exc.status, exc.message)
            except SeedResponse as exc:
                return exc.response
            except Problem as problem:
                if problem.status == 400:  # the body did not parse: the seed's own 400
                    return style(400, problem.detail)
                return problem_response(problem, request)
            except (InvalidJob, JobNotFound, JobStateConflict, DuplicateJob) as exc:
                return style(engine_status(exc), str(exc))
            except RedisFull as exc:
                return problem_response(Problem(503, str(exc), headers={"Retry-After": "30"}), request)
            except NotReplicated as exc:  # on the primary, not yet on enough replicas: sending it again is safe
                return problem_response(Problem(503, str(exc), headers={"Retry-After": "5"}), request)
            except redis.exceptions.OutOfMemoryError as exc:  # a plain write (a role's queues) while Redis is full
                detail = f"Redis is full and refused the change ({exc}); nothing was changed."
                return problem_response(Problem(503, detail, headers={"Retry-After": "30"}), request)
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                log.warning("seed %s %s: Redis unreachable: %s", request.method, request.path, exc)
                return problem_response(redis_unavailable(exc), request)

        return csrf_exempt(wrapper)

    return decorate


GO_NOT_FOUND = "404 page not found"  # Go's http.NotFound, what the Go seeds' muxes answered for any other path
FASTAPI_NOT_FOUND = "Not Found"  # Starlette's 404 detail (Jobbers)


def not_found(style: ErrorStyle, message: str) -> ViewFunction:
    """A seed's answer to a path under its prefix that none of its routes takes (any method), in its own format:
    without it the site's HTML 404 page would answer inside the seed's URL space."""

    @csrf_exempt
    def view(request: HttpRequest, rest: str = "") -> HttpResponse:
        try:
            check_same_site(request)  # as every seed route: a page of another site gets no answer of ours
        except Problem as problem:
            return problem_response(problem, request)
        return style(404, message)

    return view


def engine_status(exc: Exception) -> int:
    if isinstance(exc, JobNotFound):
        return 404
    if isinstance(exc, (JobStateConflict, DuplicateJob)):
        return 409
    return 400


def _lenient_json(content_type: str) -> bool:
    """The seeds never looked at Content-Type, and curl -d sends form encoding: accept a JSON body under those
    too, but refuse media that cannot be a JSON document (multipart, images...)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media in ("", "text/plain", "application/x-www-form-urlencoded", "application/json") or (
        media.startswith("application/") and media.endswith("+json")
    )


def read_body(request: HttpRequest) -> Any:
    """A seed route's body as JSON (any value; the route checks its shape). 400 (in the seed's format) when it
    does not parse; 413 when too large; 415 for a media type that cannot be JSON."""
    return read_json_value(request, content_types=_lenient_json)


def read_object(request: HttpRequest, message: str) -> dict[str, Any]:
    """The body as a JSON object; anything else is the seed's 400 `message`, with what was wrong."""
    try:
        body = read_body(request)
    except Problem as problem:
        if problem.status == 400:
            raise SeedError(400, f"{message}\n{problem.detail}") from None
        raise
    if not isinstance(body, dict):
        raise SeedError(400, f"{message}\nThe body must be a JSON object.")
    return body


def client() -> Client:
    return get_client()


def caller(request: HttpRequest) -> Caller:
    """Who calls this seed route (put on the request by @seed_view)."""
    return request_caller(request)


def submit(request: HttpRequest, task: str, params: dict[str, Any], **options: Any) -> str:
    """Enqueue a job of `task` for the caller and return its id. Refused (403) outside the token's limits; the
    engine refuses an unknown task and parameters its signature does not take (InvalidJob, answered 400 by
    @seed_view); nothing is enqueued then."""
    who = caller(request)
    who.check_submit(task, options.get("queue"))
    result = client().enqueue(task, params, **options)
    if result.created:
        who.remember([result.id])
    return result.id


def find_job(job_id: str, *, history: bool = False) -> Job | None:
    """A job by id in any queue, or None (also for an id that cannot be one of ours)."""
    try:
        return client().get(job_id, history=history)
    except JobNotFound:
        return None


def find_visible_job(request: HttpRequest, job_id: str, *, history: bool = False) -> Job | None:
    """A job by id that the caller may see (inside its limits; a submit token's own), or None: another's job is
    not found, as an unknown id, so that its existence cannot be probed."""
    job = find_job(job_id, history=history)
    if job is None or not caller(request).visible([job]):
        return None
    return job


def iso(moment: datetime | None) -> str | None:
    """A time as ISO 8601 in UTC with a Z, as pydantic and Go write them."""
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else None
