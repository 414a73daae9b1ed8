"""Bulk operations: the preview and confirmation, an operation's live progress (cancel, resume, its summary), and
the list of recent operations. The work itself runs on a worker (jobconsole/bulk/), never in these requests.

The dead-letters page (and the jobs pages) link to `dashboards:bulk_preview` with `?kind=resubmit|purge|retry|
cancel|delete` and their own filter in the query string, or submit the ticked `id`s with `kind` and
`selection=ticked`; jobconsole/bulk/selection.py lists the filters.
"""

from typing import Any

from django.contrib import messages
from django.core import signing
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_POST

from dashboards.permissions import view_required
from dashboards.rendering import page
from jobconsole.bulk import operations
from jobconsole.bulk.kinds import KINDS, KindSpec, UnknownKind, kind_spec
from jobconsole.bulk.operations import ConfirmError
from jobconsole.bulk.progress import progress
from jobconsole.bulk.selection import Selection, SelectionError, selection_from_request
from jobconsole.models import BulkOperation

PAGE = 50
# The spread windows offered for a resubmit (seconds, label); any whole number of seconds is accepted.
SPREADS = [(0, "no spread: all at once"), (60, "over 1 minute"), (300, "over 5 minutes"), (900, "over 15 minutes"),
           (3600, "over 1 hour"), (4 * 3600, "over 4 hours")]  # fmt: skip
LIST_PAGES = {"deadletter": "dashboards:dead_letters", "job": "dashboards:jobs"}


def _back_to_list(selection: Selection | None, spec: KindSpec | None) -> str:
    """The list the operator came from, with the same filter (a page a deployment does not route: none)."""
    name = LIST_PAGES[spec.target if spec else (selection.target if selection else "deadletter")]
    try:
        url = reverse(name)
    except NoReverseMatch:  # that page is not built, or this deployment does not route it
        return ""
    return f"{url}?{selection.query_string()}" if selection and not selection.explicit else url


def _not_allowed(spec: KindSpec) -> str:
    return f"You may not {spec.label.lower()}: your account lacks the permission ({spec.permission})."


def _refuse(request: HttpRequest, message: str, spec: KindSpec | None = None, status: int = 400) -> HttpResponse:
    context = {"error": message, "spec": spec, "back": _back_to_list(None, spec)}
    return page(request, "dashboards/bulk_preview.html", "bulk", context, status=status)


@view_required
def bulk_preview(request: HttpRequest) -> HttpResponse:
    """What the operation would act on (count and sample) and the form that confirms it. Changes nothing."""
    data = request.POST if request.method == "POST" else request.GET
    try:
        spec = kind_spec(data.get("kind", ""))
    except UnknownKind as exc:
        return _refuse(request, str(exc))
    if not spec.allowed(request.user):
        return _refuse(request, _not_allowed(spec), spec, status=403)
    try:
        selection = selection_from_request(request, spec.target)
        found = operations.preview(spec.kind.value, selection)
    except SelectionError as exc:
        return _refuse(request, str(exc), spec)
    context = {
        "spec": spec, "preview": found, "selection": selection, "back": _back_to_list(selection, spec),
        "spreads": SPREADS, "takes_reset": "reset_attempts" in spec.options,
        "takes_spread": "spread_seconds" in spec.options, "purges": spec.kind in ("purge_deadletters", "delete_jobs"),
    }  # fmt: skip
    return page(request, "dashboards/bulk_preview.html", "bulk", context)


@require_POST
@view_required
def bulk_confirm(request: HttpRequest) -> HttpResponse:
    """Freeze, record and start the previewed operation, then show its progress."""
    token = request.POST.get("confirmation", "")
    if not token:
        return _refuse(request, "This form carries no confirmation: start from the preview.")
    try:
        operation, created = operations.confirm(
            token, user=request.user, options=request.POST, reason=request.POST.get("reason", "")[:2000]
        )
    except PermissionDenied:
        return _refuse(request, "You may not carry out this operation: your account lacks its permission.", None, 403)
    except ConfirmError as exc:
        again = _preview_again(token)
        if again:
            messages.error(request, str(exc))
            return redirect(again)
        return _refuse(request, str(exc))
    except (SelectionError, UnknownKind) as exc:
        return _refuse(request, str(exc))
    spec = kind_spec(operation.kind)
    if created:
        messages.success(
            request, f"{spec.label}: {operation.total:,} job(s) frozen; the work runs on a worker. You can leave "
            "this page, it goes on.",
        )  # fmt: skip
    else:
        messages.info(request, "This preview was already confirmed: here is that operation.")
    return redirect("dashboards:bulk_detail", pk=operation.pk)


def _preview_again(token: str) -> str:
    """The preview URL of a confirmation that is genuine but stale (too old, or nothing left to do)."""
    try:
        data = signing.loads(token, salt=operations.SALT)
        selection = Selection.from_dict(data["s"])
    except (signing.BadSignature, SelectionError, KeyError, TypeError):
        return ""
    return f"{reverse('dashboards:bulk_preview')}?{'&'.join(['kind=' + data['k'], selection.query_string()])}"


def _operation(pk: int) -> BulkOperation:
    operation = BulkOperation.objects.select_related("audit").filter(pk=pk).first()
    if operation is None:
        raise Http404(f"No bulk operation #{pk}.")
    return operation


@view_required
def bulk_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """An operation: its live progress (an htmx partial polled while it runs), then its summary."""
    operation = _operation(pk)
    spec = kind_spec(operation.kind)
    context = {
        "operation": operation, "spec": spec, "progress": progress(operation),
        "may_act": spec.allowed(request.user), "selection": _describe(operation),
    }  # fmt: skip
    return page(request, "dashboards/bulk_detail.html", "bulk", context, partial="progress")


@view_required
def bulk_progress_json(request: HttpRequest, pk: int) -> JsonResponse:
    """The progress figures as JSON (the same as the page shows)."""
    return JsonResponse(progress(_operation(pk)).as_dict())


@require_POST
@view_required
def bulk_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    operation = _operation(pk)
    spec = kind_spec(operation.kind)
    if not spec.allowed(request.user):
        return _refuse(request, _not_allowed(spec), spec, status=403)
    operation = operations.request_cancel(operation, request.user)
    if operation.status == BulkOperation.Status.CANCELLED:
        messages.success(request, "Cancelled before it started: nothing was changed.")
    elif operation.cancel_requested and not operation.is_finished:
        messages.success(request, "Cancelling: it stops after the chunk under way (at most a few hundred jobs).")
    else:
        messages.info(request, f"This operation is already {operation.status}.")
    return redirect("dashboards:bulk_detail", pk=operation.pk)


@require_POST
@view_required
def bulk_resume(request: HttpRequest, pk: int) -> HttpResponse:
    operation = _operation(pk)
    spec = kind_spec(operation.kind)
    if not spec.allowed(request.user):
        return _refuse(request, _not_allowed(spec), spec, status=403)
    try:
        operations.resume(operation, request.user)
    except ConfirmError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Resumed: a worker goes on from the first chunk not done.")
    return redirect("dashboards:bulk_detail", pk=operation.pk)


@view_required
def bulk_list(request: HttpRequest) -> HttpResponse:
    """Recent operations, newest first, paged by id; live while any of them runs."""
    rows = BulkOperation.objects.all()
    kind = request.GET.get("kind", "")
    errors: list[str] = []
    if kind and kind not in KINDS:
        errors.append(f"Unknown kind {kind!r}; showing every kind.")
        kind = ""
    if kind:
        rows = rows.filter(kind=kind)
    before = request.GET.get("before", "")
    if before:
        if before.isdigit():
            rows = rows.filter(pk__lt=int(before))
        else:
            errors.append("That page link is not valid; showing the newest operations.")
    found = list(rows.order_by("-pk")[: PAGE + 1])
    shown = found[:PAGE]
    figures = [progress(op) for op in shown]
    items = [{"operation": op, "progress": p, "selection": _describe(op)} for op, p in zip(shown, figures, strict=True)]
    context = {
        "items": items, "next_before": found[PAGE - 1].pk if len(found) > PAGE else None, "kinds": KINDS,
        "kind": kind, "errors": errors,
        "live": any(not p.is_finished for p in figures),
    }  # fmt: skip
    return page(request, "dashboards/bulk_list.html", "bulk", context, partial="operations")


def _describe(operation: BulkOperation) -> dict[str, Any]:
    """The selection as recorded, for people: a filter's terms, a count of explicit ids, or the admin's."""
    data = operation.selection or {}
    if data.get("admin"):
        return {"text": data.get("description", "rows selected in the admin"), "query": ""}
    try:
        selection = Selection.from_dict(data)
    except SelectionError:
        return {"text": "(a selection this version cannot read)", "query": ""}
    return {"text": selection.describe(), "query": "" if selection.explicit else selection.query_string(),
            "list": _back_to_list(selection, kind_spec(operation.kind))}  # fmt: skip
