"""The Jobber seed's submit API: `POST /jobber/queue {"type", "payload"}` -> 201 {"job-id"} (its README), and its
code's variant `POST /jobs {"jobType", "payload"}` -> 201 {"jobId"} (routed here by api/seeds/jobs_route.py).

A job type is the name of a registered task; the free-form payload becomes its one parameter `payload`."""

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from jobconsole_api.seeds.common import SeedError, plain_text, read_object, seed_view, submit

NOT_IN_FORMAT = "Request body is not in the right format"  # the seed's 400, for every body it could not use


def enqueue(request: HttpRequest, body: dict[str, Any], *, type_field: str, id_field: str) -> HttpResponse:
    """Submit a Jobber body whose job type is in `type_field`; answer 201 with the id under `id_field`."""
    job_type = body.get(type_field)
    if not isinstance(job_type, str) or not job_type.strip():
        raise SeedError(400, f"{NOT_IN_FORMAT}\n{type_field} must be a non-empty string (the job type)")
    job_id = submit(request, job_type.strip(), {"payload": body.get("payload")})
    return JsonResponse({id_field: job_id}, status=201)


@seed_view(["POST"], scope="submit", style=plain_text)
def queue(request: HttpRequest) -> HttpResponse:
    """POST /jobber/queue."""
    return enqueue(request, read_object(request, NOT_IN_FORMAT), type_field="type", id_field="job-id")


def variant(request: HttpRequest, body: dict[str, Any]) -> HttpResponse:
    """POST /jobs with {"jobType", "payload"}: the body was read and authenticated by the /jobs route."""
    return enqueue(request, body, type_field="jobType", id_field="jobId")
