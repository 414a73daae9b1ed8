"""Jobs: search the database mirror by state, queue, task, id, unique key, parameter text and enqueue time."""

from django.http import HttpRequest, HttpResponse

from dashboards import job_search
from dashboards.permissions import view_required
from dashboards.rendering import page


@view_required
def job_list(request: HttpRequest) -> HttpResponse:
    form = job_search.JobFilterForm(request.GET, queues=job_search.known_queues(), tasks=job_search.known_tasks())
    context: dict[str, object] = {"form": form, "rows": None, "page_size": job_search.PAGE}
    if not form.is_valid():
        # No search on filters we could not read: showing everything instead would mislead.
        return page(request, "dashboards/jobs.html", "jobs", context, status=400)
    cursor = request.GET.get("cursor") or None
    try:
        found = job_search.page(form.cleaned_data, cursor)
    except job_search.BadCursor:
        context["bad_cursor"] = True
        found = job_search.page(form.cleaned_data, None)
        cursor = None
    context.update(
        {
            "rows": found.rows, "next_cursor": found.next_cursor, "paged": bool(cursor),
            "searched_back_to": found.searched_back_to, "text_scan": job_search.TEXT_SCAN,
        }
    )  # fmt: skip
    return page(request, "dashboards/jobs.html", "jobs", context)
