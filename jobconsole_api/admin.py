"""Tokens in the Django admin: adding one shows its plain text once (in the success message); revoke, never edit."""

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from jobconsole_api.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "scope", "prefix", "created_by", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["scope", "revoked_at"]
    search_fields = ["name", "prefix"]
    readonly_fields = ["prefix", "created_by", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> Any:
        return ["name", "scope"] if obj is None else ["name", "scope", *self.readonly_fields]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> Any:
        # A token's scope is part of what was handed out: change it by issuing a new token.
        return self.readonly_fields if obj is None else ["scope", *self.readonly_fields]

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        token, plain = ApiToken.objects.issue(obj.name, obj.scope, created_by=request.user)
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
