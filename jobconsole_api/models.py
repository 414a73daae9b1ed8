"""API tokens: a random secret shown once, stored as its SHA-256, found by its first characters (the prefix)."""

import hashlib
import secrets
from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone

SCOPES = ["submit", "operate"]
# What each scope allows, as the scopes it includes: an operate token can do everything a submit token can.
INCLUDES: dict[str, set[str]] = {"submit": {"submit"}, "operate": {"submit", "operate"}}
TOKEN_PREFIX = "jc_"  # marks our tokens in logs and secret scanners
PREFIX_LENGTH = 8  # characters after TOKEN_PREFIX kept in clear for lookup and display


def hash_token(token: str) -> str:
    # A token is 32 random bytes, so a plain (unsalted, fast) hash is safe: there is nothing to guess.
    return hashlib.sha256(token.encode()).hexdigest()


class ApiTokenManager(models.Manager):  # type: ignore[type-arg]
    def issue(self, name: str, scope: str, created_by: object | None = None) -> tuple["ApiToken", str]:
        """A new token and its plain text, which is not stored anywhere: show it once."""
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
        plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = self.create(
            name=name,
            scope=scope,
            prefix=plain[: len(TOKEN_PREFIX) + PREFIX_LENGTH],
            secret_hash=hash_token(plain),
            created_by=created_by,
        )
        return token, plain


class ApiToken(models.Model):
    name = models.CharField(max_length=100, help_text="who or what uses it, e.g. 'billing service'")
    prefix = models.CharField(max_length=20, db_index=True, editable=False, help_text="its first characters")
    secret_hash = models.CharField(max_length=64, unique=True, editable=False, help_text="SHA-256 of the token")
    scope = models.CharField(
        max_length=16,
        choices=[("submit", "submit: enqueue jobs and read them"), ("operate", "operate: everything")],
        default="submit",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects: ClassVar[ApiTokenManager] = ApiTokenManager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.scope}, {self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def allows(self, scope: str) -> bool:
        return scope in INCLUDES.get(self.scope, set())

    @property
    def actor(self) -> str:
        """How the audit log names the caller."""
        return f"api:{self.name}"


class SubmittedJob(models.Model):
    """Which token submitted a job: a submit-only token reads its own jobs and no others'.

    Tied to the job's mirrored row without a database constraint (the row comes a moment after the submission,
    when the mirror applies it): when the row goes (retention, a purge or delete), this record goes with it."""

    job = models.OneToOneField(
        "jobconsole.Job", primary_key=True, db_constraint=False, on_delete=models.CASCADE, related_name="submitter"
    )
    token = models.ForeignKey(ApiToken, on_delete=models.CASCADE, related_name="jobs")
    submitted_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["token", "submitted_at"], name="api_submitted_token_time")]

    def __str__(self) -> str:
        return f"{self.pk} by {self.token_id}"
