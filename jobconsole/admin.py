"""Django admin over the database mirror. Every change goes to Redis through the engine (compare-and-set
where the operator acted on what they saw); the mirror brings the result back into these tables.

Permissions: Django's view permission lets a user look; `operate_*` (retry, cancel, edit, resubmit,
pause) and `purge_*` (delete, purge) are separate custom permissions. Every action writes an audit record.
"""

import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from jobconsole import audit, periodic
from jobconsole.bulk.operations import ConfirmError, start_from_rows
from jobconsole.conf import bulk_config, db_retention, retention
from jobconsole.core import DuplicateJob, InvalidJob, JobNotFound, JobQueueError, JobState, JobStateConflict
from jobconsole.core.editing import edit_job
from jobconsole.engine import get_client
from jobconsole.models import (
    Attempt,
    AuditLog,
    DeadLetter,
    Job,
    MirrorCursor,
    MirrorResync,
    OutboxEntry,
    PeriodicSchedule,
    Queue,
)

EDITABLE = ["priority", "run_at", "params"]
BATCH = 500


def _duration(seconds: float) -> str:
    if seconds >= 86_400 and seconds % 86_400 == 0:
        return f"{int(seconds // 86_400)} d"
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    return f"{seconds:g} s"


def retention_context() -> dict[str, Any]:
    """How long finished jobs are kept, in Redis and in the database (shown above the lists)."""
    redis_side = retention()
    database = db_retention()
    return {
        "retention_rows": [
            (state, _duration(seconds), _duration(database[state].total_seconds()))
            for state, seconds in redis_side.as_dict().items()
        ],
        "audit_retention": _duration(database["audit"].total_seconds()),
    }


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValidationError(f"Not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValidationError("Parameters must be a JSON object.")
    return value


def _attempts_table(job_id: str) -> SafeString:
    rows = Attempt.objects.filter(job_id=job_id).order_by("number")
    return render_to_string("admin/jobconsole/_attempts.html", {"attempts": rows})


class _Outcomes:
    """Counts what an action did to each job, for the message and the audit record."""

    def __init__(self) -> None:
        self.done: list[str] = []
        self.refused: dict[str, str] = {}

    def run(self, job_id: str, fn: Callable[[], object]) -> None:
        try:
            fn()
            self.done.append(job_id)
        except JobStateConflict as exc:
            self.refused[job_id] = f"it is {exc.state}"
        except JobNotFound:
            self.refused[job_id] = "it is no longer in Redis"
        except DuplicateJob as exc:
            self.refused[job_id] = f"its unique key is held by live job {exc.job_id}"
        except JobQueueError as exc:
            self.refused[job_id] = str(exc)

    def report(self, modeladmin: "admin.ModelAdmin[Any]", request: HttpRequest, verb: str) -> None:
        if self.done:
            modeladmin.message_user(request, f"{verb} {len(self.done)} job(s).", messages.SUCCESS)
        if self.refused:
            sample = "; ".join(f"{job_id}: {why}" for job_id, why in list(self.refused.items())[:5])
            more = f" (and {len(self.refused) - 5} more)" if len(self.refused) > 5 else ""
            modeladmin.message_user(
                request, f"Refused for {len(self.refused)} job(s) that moved on: {sample}{more}.", messages.WARNING
            )

    def audit(self, request: HttpRequest, action: str, jobs: Iterable[str], **detail: Any) -> None:
        ids = list(jobs)
        if self.refused:
            detail["refused"] = self.refused
        audit.record(request.user, action, job_ids=ids, count=len(self.done), refused=len(self.refused), detail=detail)


def _in_background(
    modeladmin: "admin.ModelAdmin[Any]", request: HttpRequest, queryset: QuerySet[Any], kind: str, **options: Any
) -> bool:
    """Hand the action to a bulk operation (jobconsole/bulk/) when it covers more rows than BULK.ADMIN_THRESHOLD:
    the rows are frozen now and a worker does the work. True when it was handed over (or refused)."""
    count = queryset.count()
    if count <= bulk_config()["ADMIN_THRESHOLD"]:
        return False
    everything = request.POST.get("select_across") == "1"
    filters = request.GET.urlencode()
    description = {
        "admin": True, "target": queryset.model._meta.model_name, "rows": count, "admin_filter": filters,
        "description": f"{'all ' if everything else ''}{count:,} rows selected in the admin"
        + (f" (filter {filters})" if everything and filters else ""),
    }  # fmt: skip
    try:
        operation = start_from_rows(kind, queryset, user=request.user, description=description, options=options)
    except ConfirmError as exc:
        modeladmin.message_user(request, str(exc), messages.WARNING)
        return True
    try:
        url = reverse("dashboards:bulk_detail", args=[operation.pk])
    except NoReverseMatch:  # a project without the console
        url = ""
    text = f"{operation.total:,} job(s) handed to bulk operation #{operation.pk}, which runs on a worker in chunks"
    if url:
        modeladmin.message_user(request, format_html('{}: <a href="{}">follow its progress</a>.', text, url),
                                messages.SUCCESS)  # fmt: skip
    else:
        modeladmin.message_user(request, f"{text}.", messages.SUCCESS)
    return True


def _in_batches(queryset: QuerySet[Any], *fields: str) -> Iterable[tuple[Any, ...]]:
    rows = list(queryset.values_list(*fields))
    for start in range(0, len(rows), BATCH):
        yield from rows[start : start + BATCH]


# --- jobs ------------------------------------------------------------------------------------------


class JobEditForm(forms.ModelForm):  # type: ignore[type-arg]
    """Edits a waiting job in Redis, compare-and-set against the state the operator saw.

    The compare-and-set is the validation: doing the Redis edit here (not in save_model) turns a
    refusal into an ordinary form error shown on the page, with nothing changed anywhere."""

    expected_state = forms.CharField(widget=forms.HiddenInput)
    expected_attempts = forms.IntegerField(widget=forms.HiddenInput)
    audit_reason = forms.CharField(required=False, label="Reason", help_text="Optional; kept in the audit log.")
    params = forms.CharField(widget=forms.Textarea(attrs={"rows": 8, "cols": 80}), help_text="A JSON object.")

    class Meta:
        model = Job
        fields = ["priority", "run_at", "params"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk and not self.is_bound:
            self.initial["expected_state"] = self.instance.state
            self.initial["expected_attempts"] = self.instance.attempts
            try:
                self.initial["params"] = json.dumps(json.loads(self.instance.params), indent=2, ensure_ascii=False)
            except ValueError:
                pass
        self.edit_result: Any = None

    def clean_params(self) -> str:
        return json.dumps(_json_object(self.cleaned_data["params"]), separators=(",", ":"), ensure_ascii=False)

    def has_changed(self) -> bool:
        return bool(self.changes())

    def changes(self) -> dict[str, Any]:
        if not hasattr(self, "cleaned_data"):
            return {}
        out: dict[str, Any] = {}
        if "priority" in self.changed_data and self.cleaned_data.get("priority") is not None:
            out["priority"] = self.cleaned_data["priority"]
        if "run_at" in self.changed_data and self.cleaned_data.get("run_at") is not None:
            out["run_at"] = self.cleaned_data["run_at"]
        # params_data is the stored text itself when it is not JSON: an operator may be fixing exactly that.
        stored = self.instance.params_data if self.instance.params else {}
        if "params" in self.cleaned_data and json.loads(self.cleaned_data["params"]) != stored:
            out["params"] = json.loads(self.cleaned_data["params"])
        return out

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        changes = self.changes()
        if self.errors or not changes:
            return cleaned
        try:
            self.edit_result = edit_job(
                get_client(), self.instance.id, queue=self.instance.queue,
                expected_state=cleaned["expected_state"], expected_attempts=cleaned["expected_attempts"], **changes,
            )  # fmt: skip
        except JobStateConflict as exc:
            raise ValidationError(
                f"Nothing was changed: the job moved on since this page was loaded (it was "
                f"{cleaned['expected_state']}, it is now {exc.state}). Reload the page to see it as it is."
            ) from None
        except JobNotFound:
            raise ValidationError("Nothing was changed: the job is no longer in Redis.") from None
        except InvalidJob as exc:
            raise ValidationError(f"Nothing was changed: {exc}") from None
        return cleaned


class AttemptInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Attempt
    extra = 0
    can_delete = False
    show_change_link = False
    fields = ("number", "attempt", "outcome", "worker", "host", "pid", "started_at", "ended_at", "duration",
              "error_class", "message", "top_frame", "traceback")  # fmt: skip
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = JobEditForm
    list_display = ["id", "task", "queue", "state", "priority", "attempts", "enqueued_at", "finished_at", "in_redis"]
    list_filter = (
        "state", "queue", "task", ("enqueued_at", admin.DateFieldListFilter),
        ("finished_at", admin.DateFieldListFilter), "in_redis",
    )  # fmt: skip
    search_fields = ["=id", "=unique_key", "params"]
    search_help_text = "Exact job id or unique key, or text inside the parameters."
    date_hierarchy = "enqueued_at"
    list_per_page = 100
    show_full_result_count = False
    inlines = [AttemptInline]
    actions = ["retry_now", "cancel_jobs", "delete_jobs"]
    change_list_template = "admin/jobconsole/job/change_list.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # deleting goes through Redis: the "Delete" action, with the purge permission

    def has_change_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        if not request.user.has_perm("jobconsole.operate_job"):
            return False
        return obj is None or (obj.in_redis and obj.is_waiting)

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("jobconsole.operate_job")

    def has_purge_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("jobconsole.purge_job")

    def get_readonly_fields(self, request: HttpRequest, obj: Job | None = None) -> list[str]:
        every = [f.name for f in Job._meta.fields]
        if obj is not None and self.has_change_permission(request, obj):
            return [name for name in every if name not in EDITABLE]
        return every

    def get_fieldsets(self, request: HttpRequest, obj: Job | None = None) -> Any:
        readonly = [f.name for f in Job._meta.fields if f.name not in EDITABLE]
        if obj is not None and self.has_change_permission(request, obj):
            return [
                ("Edit (applied to Redis only if the job is still as shown here)",
                 {"fields": [*EDITABLE, "audit_reason", "expected_state", "expected_attempts"]}),
                ("Job", {"fields": readonly}),
            ]  # fmt: skip
        return [("Job", {"fields": [*EDITABLE[:2], "params", *readonly]})]

    def save_model(self, request: HttpRequest, obj: Job, form: Any, change: bool) -> None:
        # Redis was changed in the form's clean(); the mirror writes the row from Redis.
        result = form.edit_result
        if result is None:
            return
        audit.record(
            request.user, "edit_job", job_ids=[obj.id], queue=obj.queue,
            reason=form.cleaned_data.get("audit_reason", ""),
            detail={"changes": {k: str(v) for k, v in form.changes().items()}, "state": str(result.state)},
        )  # fmt: skip
        messages.info(request, f"Job {obj.id} changed in Redis (now {result.state}).")

    def construct_change_message(self, request: HttpRequest, form: Any, formsets: Any, add: bool = False) -> Any:
        return [{"changed": {"fields": sorted(form.changes())}}] if form.edit_result else []

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        return super().changelist_view(request, {**retention_context(), **(extra_context or {})})

    @admin.action(description="Retry now (waiting jobs run now; finished ones are resubmitted)",
                  permissions=["operate"])  # fmt: skip
    def retry_now(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        if _in_background(self, request, queryset, "retry_jobs"):
            return
        client, outcomes, ids = get_client(), _Outcomes(), []
        for job_id, queue in _in_batches(queryset, "id", "queue"):
            ids.append(job_id)
            outcomes.run(job_id, partial(client.requeue, job_id, queue))
        outcomes.report(self, request, "Queued")
        outcomes.audit(request, "retry", ids)

    @admin.action(description="Cancel (running jobs are asked to stop)", permissions=["operate"])
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        if _in_background(self, request, queryset, "cancel_jobs"):
            return
        client, outcomes, ids = get_client(), _Outcomes(), []
        for job_id, queue in _in_batches(queryset, "id", "queue"):
            ids.append(job_id)
            outcomes.run(job_id, partial(client.cancel, job_id, queue))
        outcomes.report(self, request, "Cancelled")
        outcomes.audit(request, "cancel", ids)

    @admin.action(description="Delete (from Redis and the database; never a running job)", permissions=["purge"])
    def delete_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        if _in_background(self, request, queryset, "delete_jobs"):
            return
        outcomes, ids = _Outcomes(), []
        for job_id, queue in _in_batches(queryset, "id", "queue"):
            ids.append(job_id)
            outcomes.run(job_id, partial(_delete, job_id, queue))
        outcomes.report(self, request, "Deleted")
        outcomes.audit(request, "delete", ids)


def _delete(job_id: str, queue: str) -> None:
    """Delete from Redis (refused while running); the rows go too, also when Redis had already forgotten it."""
    try:
        get_client().delete(job_id, queue)
    except JobNotFound:
        pass
    Job.objects.filter(id=job_id).delete()


# --- dead letters ----------------------------------------------------------------------------------


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Rows nobody adds, edits or deletes by hand (the mirror writes them; actions change Redis)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class OpenFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("open", "Not resubmitted"), ("resubmitted", "Resubmitted")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "open":
            return queryset.filter(resubmitted_at__isnull=True)
        if self.value() == "resubmitted":
            return queryset.filter(resubmitted_at__isnull=False)
        return queryset


class ResubmitForm(forms.Form):
    params = forms.CharField(widget=forms.Textarea(attrs={"rows": 12, "cols": 90}), help_text="A JSON object.")
    reset_attempts = forms.BooleanField(required=False, initial=True, help_text="Start counting attempts again.")
    reason = forms.CharField(required=False, help_text="Optional; kept in the audit log.")
    expected_attempts = forms.IntegerField(widget=forms.HiddenInput)

    def clean_params(self) -> dict[str, Any]:
        return _json_object(self.cleaned_data["params"])


@admin.register(DeadLetter)
class DeadLetterAdmin(ReadOnlyAdmin):  # read-only rows; operators act through the actions
    list_display = ["job_id", "task", "version", "queue", "died_at", "error_class", "fingerprint", "attempts",
                    "resubmitted_at", "resubmitted_by"]  # fmt: skip
    list_filter = [OpenFilter, "queue", "task", "version", "fingerprint", ("died_at", admin.DateFieldListFilter)]
    search_fields = ["=job__id", "error_class", "message"]
    search_help_text = "Exact job id, or text in the error class or message."
    date_hierarchy = "died_at"
    readonly_fields = [
        "job", "queue", "task", "version", "died_at", "attempts", "error_class", "message", "top_frame",
        "fingerprint", "resubmitted_at", "resubmitted_by", "parameters", "history",
    ]  # fmt: skip
    fields = tuple(readonly_fields)
    actions = ["resubmit", "resubmit_reset", "resubmit_edited", "purge"]
    change_list_template = "admin/jobconsole/deadletter/change_list.html"

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("jobconsole.operate_deadletter")

    def has_purge_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("jobconsole.purge_deadletter")

    @admin.display(description="parameters")
    def parameters(self, obj: DeadLetter) -> str:
        return obj.job.params

    @admin.display(description="attempt history")
    def history(self, obj: DeadLetter) -> SafeString:
        return _attempts_table(obj.job_id)

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        return super().changelist_view(request, {**retention_context(), **(extra_context or {})})

    def _resubmit(self, request: HttpRequest, queryset: QuerySet[DeadLetter], reset: bool) -> None:
        open_letters = queryset.filter(resubmitted_at__isnull=True)
        if _in_background(self, request, open_letters, "resubmit_deadletters", reset_attempts=reset, spread_seconds=0):
            return
        client, outcomes, ids = get_client(), _Outcomes(), []
        for pk, job_id, queue in _in_batches(queryset.filter(resubmitted_at__isnull=True), "pk", "job_id", "queue"):
            ids.append(job_id)
            outcomes.run(
                job_id,
                partial(
                    edit_job, client, job_id, queue=queue, expected_state=JobState.DEAD, resubmit=True,
                    reset_attempts=reset,
                ),
            )  # fmt: skip
            if outcomes.done and outcomes.done[-1] == job_id:
                _mark_resubmitted(pk, request)
        outcomes.report(self, request, "Resubmitted")
        outcomes.audit(request, "resubmit", ids, reset_attempts=reset)

    @admin.action(description="Resubmit (keep the attempt count)", permissions=["operate"])
    def resubmit(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> None:
        self._resubmit(request, queryset, reset=False)

    @admin.action(description="Resubmit with the attempt count reset", permissions=["operate"])
    def resubmit_reset(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> None:
        self._resubmit(request, queryset, reset=True)

    @admin.action(description="Resubmit after editing its parameters (one job)", permissions=["operate"])
    def resubmit_edited(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> HttpResponse | None:
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one dead letter to edit and resubmit.", messages.WARNING)
            return None
        letter = queryset.select_related("job").get()
        if "apply" in request.POST:
            form = ResubmitForm(request.POST)
            if form.is_valid():
                data = form.cleaned_data
                try:
                    edit_job(
                        get_client(), letter.job_id, queue=letter.queue, expected_state=JobState.DEAD,
                        expected_attempts=data["expected_attempts"], params=data["params"], resubmit=True,
                        reset_attempts=data["reset_attempts"],
                    )  # fmt: skip
                except (JobQueueError, ValidationError) as exc:
                    form.add_error(None, f"Nothing was changed: {_why(exc)}")
                else:
                    _mark_resubmitted(letter.pk, request)
                    audit.record(
                        request.user, "resubmit_edited", job_ids=[letter.job_id], queue=letter.queue,
                        reason=data["reason"],
                        detail={"reset_attempts": data["reset_attempts"], "params": data["params"]},
                    )  # fmt: skip
                    self.message_user(request, f"Resubmitted {letter.job_id} with new parameters.", messages.SUCCESS)
                    return None
        else:
            try:
                pretty = json.dumps(json.loads(letter.job.params), indent=2, ensure_ascii=False)
            except ValueError:
                pretty = letter.job.params
            form = ResubmitForm(initial={"params": pretty, "expected_attempts": letter.job.attempts})
        context = {
            **self.admin_site.each_context(request),
            "title": f"Edit and resubmit {letter.job_id}",
            "letter": letter,
            "form": form,
            "opts": self.model._meta,
            "action": "resubmit_edited",
            "history": _attempts_table(letter.job_id),
        }
        return TemplateResponse(request, "admin/jobconsole/deadletter/resubmit_edited.html", context)

    @admin.action(description="Purge (delete the job and its history everywhere)", permissions=["purge"])
    def purge(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> None:
        if _in_background(self, request, queryset, "purge_deadletters"):
            return
        outcomes, ids = _Outcomes(), []
        for job_id, queue in _in_batches(queryset, "job_id", "queue"):
            if job_id in ids:
                continue
            ids.append(job_id)
            outcomes.run(job_id, partial(_delete, job_id, queue))
        outcomes.report(self, request, "Purged")
        outcomes.audit(request, "purge", ids)


def _why(exc: Exception) -> str:
    if isinstance(exc, JobStateConflict):
        return f"the job moved on since this page was loaded (it is now {exc.state})."
    if isinstance(exc, ValidationError):
        return "; ".join(exc.messages)
    return str(exc)


def _mark_resubmitted(pk: int, request: HttpRequest) -> None:
    DeadLetter.objects.filter(pk=pk).update(resubmitted_at=timezone.now(), resubmitted_by=request.user.get_username())


# --- queues, audit, mirror -------------------------------------------------------------------------


@admin.register(Queue)
class QueueAdmin(ReadOnlyAdmin):
    list_display = ["name", "paused", "changed_at", "counts"]
    actions = ["pause", "resume"]
    readonly_fields = ["name", "paused", "changed_at", "counts"]

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("jobconsole.operate_queue")

    @admin.display(description="now in Redis")
    def counts(self, obj: Queue) -> str:
        try:
            c = get_client().counts(obj.name)
        except JobQueueError:
            return "?"
        except Exception:  # noqa: BLE001 - Redis down must not break the page
            return "Redis unavailable"
        return (f"queued {c.queued}, scheduled {c.scheduled}, running {c.running}, completed {c.completed}, "
                f"dead {c.dead}, failed {c.failed}")  # fmt: skip

    def _set(self, request: HttpRequest, queryset: QuerySet[Queue], pause: bool) -> None:
        client = get_client()
        names = list(queryset.values_list("name", flat=True))
        changed = [name for name in names if (client.pause(name) if pause else client.resume(name))]
        Queue.objects.filter(name__in=names).update(paused=pause, changed_at=timezone.now())
        audit.record(request.user, "pause" if pause else "resume", filter={"queues": names}, count=len(changed))
        self.message_user(request, f"{'Paused' if pause else 'Resumed'}: {', '.join(names)}.", messages.SUCCESS)

    @admin.action(description="Pause (workers claim nothing from it)", permissions=["operate"])
    def pause(self, request: HttpRequest, queryset: QuerySet[Queue]) -> None:
        self._set(request, queryset, True)

    @admin.action(description="Resume", permissions=["operate"])
    def resume(self, request: HttpRequest, queryset: QuerySet[Queue]) -> None:
        self._set(request, queryset, False)


@admin.register(AuditLog)
class AuditLogAdmin(ReadOnlyAdmin):
    list_display = ["at", "actor", "action", "queue", "count", "refused", "reason"]
    list_filter = ["action", "actor", ("at", admin.DateFieldListFilter)]
    search_fields = ["reason", "actor"]
    date_hierarchy = "at"


@admin.register(MirrorResync)
class MirrorResyncAdmin(ReadOnlyAdmin):
    list_display = ["at", "queue", "reason", "jobs", "missing", "restored", "from_id", "to_id"]
    list_filter = ["reason", "queue"]


@admin.register(MirrorCursor)
class MirrorCursorAdmin(ReadOnlyAdmin):
    list_display = ["queue", "last_id", "last_event_at", "events", "updated_at"]

    @admin.display(description="last applied event written at")
    def last_event_at(self, obj: MirrorCursor) -> Any:
        millis = int(obj.last_id.split("-", 1)[0] or 0)
        return datetime.fromtimestamp(millis / 1000, tz=UTC) if millis else None


@admin.register(OutboxEntry)
class OutboxEntryAdmin(ReadOnlyAdmin):
    list_display = ["id", "task", "queue", "created_at", "published_at", "status", "tries"]
    list_filter = ["status", ("created_at", admin.DateFieldListFilter)]
    search_fields = ["=id", "task"]


@admin.register(PeriodicSchedule)
class PeriodicScheduleAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Database-defined periodic jobs. Last fired and the next runs come from Redis, read-only; enabling,
    disabling and running now are audited like the console's actions."""

    list_display = ["name", "task", "expression", "enabled", "misfire", "last_fired", "next_run"]
    list_filter = ["enabled", "misfire"]
    search_fields = ["name", "task"]
    readonly_fields = ["last_fired", "next_runs", "created_at", "updated_at"]
    actions = ["enable", "disable", "run_now"]
    fieldsets = [
        (None, {"fields": ["name", "task", "params", "enabled"]}),
        ("When", {"fields": ["cron", "every_seconds", "timezone", "misfire"]}),
        ("Overrides", {"fields": ["queue", "priority"]}),
        ("In Redis", {"fields": ["last_fired", "next_runs", "created_at", "updated_at"]}),
    ]

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("jobconsole.operate_periodicschedule")

    def _info(self, obj: PeriodicSchedule) -> periodic.ScheduleInfo | None:
        try:
            return periodic.describe([obj.to_schedule()])[0]
        except ValueError:
            return None
        except Exception:  # noqa: BLE001 - Redis down must not break the page
            return None

    @admin.display(description="when")
    def expression(self, obj: PeriodicSchedule) -> str:
        return obj.cron or (f"every {obj.every_seconds:g} s" if obj.every_seconds else "")

    @admin.display(description="last fired")
    def last_fired(self, obj: PeriodicSchedule) -> Any:
        info = self._info(obj) if obj.pk else None
        return info.last_fired_at if info else None

    @admin.display(description="next run")
    def next_run(self, obj: PeriodicSchedule) -> Any:
        info = self._info(obj)
        return info.next_runs[0] if info and info.next_runs and obj.enabled else None

    @admin.display(description="next runs (UTC)")
    def next_runs(self, obj: PeriodicSchedule) -> str:
        info = self._info(obj) if obj.pk else None
        if not info or not obj.enabled:
            return "—"
        return ", ".join(f"{moment:%Y-%m-%d %H:%M:%S}" for moment in info.next_runs)

    def _set_enabled(self, request: HttpRequest, queryset: QuerySet[PeriodicSchedule], enabled: bool) -> None:
        names = list(queryset.values_list("name", flat=True))
        for name in names:
            periodic.set_enabled(name, enabled, request.user)
        self.message_user(request, f"{'Enabled' if enabled else 'Disabled'}: {', '.join(names)}.", messages.SUCCESS)

    @admin.action(description="Enable", permissions=["operate"])
    def enable(self, request: HttpRequest, queryset: QuerySet[PeriodicSchedule]) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(description="Disable (its slots pass unfired)", permissions=["operate"])
    def disable(self, request: HttpRequest, queryset: QuerySet[PeriodicSchedule]) -> None:
        self._set_enabled(request, queryset, False)

    @admin.action(description="Run now (one job, its slots untouched)", permissions=["operate"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[PeriodicSchedule]) -> None:
        for name in queryset.values_list("name", flat=True):
            try:
                result = periodic.run_now(name, request.user)
            except (InvalidJob, periodic.ScheduleNotFound) as exc:
                self.message_user(request, f"{name}: not enqueued: {exc}", messages.ERROR)
                continue
            self.message_user(request, f"{name}: job {result.id} enqueued on {result.queue}.", messages.SUCCESS)
