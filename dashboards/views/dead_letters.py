"""Dead letters: filters, failures grouped by fingerprint, the list, and export of what a filter matches."""

import json
from collections.abc import Iterator

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from dashboards import dead_letters
from dashboards.distinct import distinct_values
from dashboards.paging import keyset_page
from dashboards.permissions import view_required
from dashboards.rendering import page
from jobconsole.csv_cells import csv_lines
from jobconsole.models import Attempt, DeadLetter

PAGE = 50
TEXT_WINDOW = 20_000  # the newest dead letters the page searches for error text (a LIKE reads every row it is given)
EXPORT_CHUNK = 2000
EXPORT_FIELDS = ["job_id", "queue", "task", "version", "died_at", "attempts", "error_class", "message", "top_frame",
                 "fingerprint", "resubmitted_at", "resubmitted_by"]  # fmt: skip


@view_required
def dead_letter_list(request: HttpRequest) -> HttpResponse:
    rows, filters = dead_letters.select(request.GET, text_window=TEXT_WINDOW)
    context = {
        "filters": filters,
        "filtered": bool(filters.values),
        "filter_query": dead_letters.filter_query(filters).urlencode(),
        "queues": distinct_values(DeadLetter, "queue"),
        "tasks": distinct_values(DeadLetter, "task"),
    }
    if filters.errors:
        return page(request, "dashboards/dead_letters.html", "dead", {**context, "bad_filters": True}, status=400)
    groups = dead_letters.groups(rows)
    samples = _sample_tracebacks([str(g["job_id"]) for g in groups[:10] if g["job_id"]])
    for group in groups:
        group["sample"] = samples.get(str(group["job_id"]))
    # The groups counted every row the filters match (from an index); only past the groups' limit count again.
    total = sum(g["count"] for g in groups) if len(groups) < dead_letters.GROUPS else None
    listed = keyset_page(rows, "died_at", request.GET, PAGE, total=total)
    reruns = dead_letters.reruns(listed.rows)
    context.update(
        listed=listed, letters=listed.rows, next_cursor=listed.older, groups=groups, bad_cursor=listed.bad_cursor,
        rows=[(d, reruns.get(d.pk)) for d in listed.rows],
    )  # fmt: skip
    return page(request, "dashboards/dead_letters.html", "dead", context)


def _sample_tracebacks(job_ids: list[str]) -> dict[str, str]:
    """The traceback of the last attempt of each job that has one (the latest death of each top group)."""
    out: dict[str, str] = {}
    for job_id in job_ids:
        attempt = (
            Attempt.objects.filter(job_id=job_id).exclude(traceback="").order_by("-number")
            .values_list("traceback", flat=True).first()
        )  # fmt: skip
        out[job_id] = attempt or ""
    return out


@view_required
def dead_letter_export(request: HttpRequest, fmt: str) -> HttpResponse | StreamingHttpResponse:
    """Everything the filter matches, streamed (never held in memory), as CSV or JSON lines in an array."""
    rows, filters = dead_letters.select(request.GET)
    if filters.errors:
        return HttpResponse("; ".join(filters.errors), status=400, content_type="text/plain")
    values = rows.order_by("-died_at", "-pk").values_list(*EXPORT_FIELDS).iterator(chunk_size=EXPORT_CHUNK)
    if fmt == "csv":
        body: Iterator[str] = csv_lines(EXPORT_FIELDS, values)  # formulas neutralised for spreadsheets
        content_type = "text/csv; charset=utf-8"
    else:
        body = _json(values)
        content_type = "application/json"
    response = StreamingHttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="dead-letters.{fmt}"'
    return response


def _text(value: object) -> object:
    return value.isoformat() if hasattr(value, "isoformat") else value


def _json(values: Iterator[tuple[object, ...]]) -> Iterator[str]:
    yield "["
    first = True
    for row in values:
        item = json.dumps(dict(zip(EXPORT_FIELDS, (_text(v) for v in row), strict=True)), ensure_ascii=False)
        yield ("\n" if first else ",\n") + item
        first = False
    yield "\n]\n"
