"""`/jobs` (no slash), which two seeds used for different bodies, beside the console's page at `/jobs/`:
- POST with "jobType": Jobber's code's variant (201 {"jobId"});
- any other POST: the Go scheduler (202 {"job_id"}), "type" being its job type;
- GET or HEAD: a permanent redirect to the console's `/jobs/`, as Django's APPEND_SLASH answered before."""

from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from jobconsole_api.seeds import goscheduler, jobber
from jobconsole_api.seeds.common import plain_text, read_object, seed_view

ALLOWED = "GET, HEAD, POST"


@seed_view(["POST"], scope="submit", style=plain_text, method_message="Method not allowed")
def _submit(request: HttpRequest) -> HttpResponse:
    body = read_object(request, goscheduler.INVALID_BODY)
    if "jobType" in body:
        return jobber.variant(request, body)
    return goscheduler.enqueue(request, body)


@csrf_exempt
def jobs(request: HttpRequest) -> HttpResponse:
    if request.method in ("GET", "HEAD"):
        query = request.META.get("QUERY_STRING", "")
        return HttpResponsePermanentRedirect(reverse("dashboards:jobs") + (f"?{query}" if query else ""))
    if request.method != "POST":
        response = plain_text(405, "Method not allowed")  # the Go scheduler's
        response.headers["Allow"] = ALLOWED
        return response
    return _submit(request)
