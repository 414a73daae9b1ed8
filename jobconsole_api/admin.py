"""Tokens in the Django admin: adding one shows its plain text once (in the success message); revoke, never edit.
A token's scope and its queue and task limits are part of what was handed out: change them by issuing a new one."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from jobconsole_api.models import ApiToken, clean_names


class NamesField(forms.CharField):
    """Queue or task names, separated by commas or spaces, as a sorted list (empty: no limit)."""

    def __init__(self, what: str, **kwargs: Any) -> None:
        self.what = what
        super().__init__(required=False, **kwargs)

    def prepare_value(self, value: Any) -> Any:
        return ", ".join(value) if isinstance(value, list) else value

    def clean(self, value: Any) -> list[str]:
        text = super().clean(value) or ""
        try:
            return clean_names(text.replace(",", " ").split(), self.what)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None


class ApiTokenForm(forms.ModelForm):  # type: ignore[type-arg]
    queues = NamesField("queue", help_text="only these queues, separated by commas (empty: every queue)")
    tasks = NamesField("task", help_text="only these tasks, separated by commas (empty: every task)")

    class Meta:
        model = ApiToken
        fields = ["name", "scope", "queues", "tasks"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = ApiTokenForm
    list_display = ["name", "scope", "queues", "tasks", "prefix", "created_by", "created_at", "last_used_at",
                    "revoked_at"]  # fmt: skip
    list_filter = ["scope", "revoked_at"]
    search_fields = ["name", "prefix"]
    readonly_fields = ["prefix", "created_by", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> Any:
        added = ["name", "scope", "queues", "tasks"]
        return added if obj is None else [*added, *self.readonly_fields]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> Any:
        # What a token may do is part of what was handed out: change it by issuing a new token.
        return self.readonly_fields if obj is None else ["scope", "queues", "tasks", *self.readonly_fields]

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        token, plain = ApiToken.objects.issue(
            obj.name, obj.scope, created_by=request.user, queues=obj.queues, tasks=obj.tasks
        )
        obj.pk, obj.prefix, obj.secret_hash, obj.created_at = (
            token.pk,
            token.prefix,
            token.secret_hash,
            token.created_at,
        )
        messages.warning(request, f"The token, shown only this once; copy it now: {plain}")

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count = queryset.filter(revoked_at=None).update(revoked_at=timezone.now())
        messages.success(request, f"Revoked {count} token(s).")
