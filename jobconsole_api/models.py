"""API tokens: a random secret shown once, stored as its SHA-256, found by its first characters (the prefix)."""

import hashlib
import re
import secrets
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

# A token's scope (what each allows: jobconsole_api/access.py, docs/api.md).
SCOPES = ["read", "submit", "operate"]
TOKEN_PREFIX = "jc_"  # marks our tokens in logs and secret scanners
PREFIX_LENGTH = 8  # characters after TOKEN_PREFIX kept in clear for lookup and display
NAME = re.compile(r"[A-Za-z0-9_.\-]{1,100}")  # a queue's or task's name (as the API's NAME_PATTERN)


def clean_names(names: Iterable[str], what: str) -> list[str]:
    """Queue or task names for a token's limits: stripped, sorted, without repeats; ValueError for a bad one."""
    cleaned = sorted({str(name).strip() for name in names})
    for name in cleaned:
        if not NAME.fullmatch(name):
            raise ValueError(f"{what} {name!r} is not a valid name (letters, digits, _ . -; at most 100)")
    return cleaned


def _check_names(value: Any, what: str) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValidationError(f'a JSON list of {what} names, e.g. ["billing"]')
    try:
        clean_names(value, what)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


def validate_queue_names(value: Any) -> None:
    _check_names(value, "queue")


def validate_task_names(value: Any) -> None:
    _check_names(value, "task")


def hash_token(token: str) -> str:
    # A token is 32 random bytes, so a plain (unsalted, fast) hash is safe: there is nothing to guess.
    return hashlib.sha256(token.encode()).hexdigest()


class ApiTokenManager(models.Manager):  # type: ignore[type-arg]
    def issue(
        self,
        name: str,
        scope: str,
        created_by: object | None = None,
        *,
        queues: Sequence[str] = (),
        tasks: Sequence[str] = (),
    ) -> tuple["ApiToken", str]:
        """A new token and its plain text, which is not stored anywhere: show it once. `queues` and `tasks` limit
        it to those names (empty: no limit)."""
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
        plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = self.create(
            name=name,
            scope=scope,
            prefix=plain[: len(TOKEN_PREFIX) + PREFIX_LENGTH],
            secret_hash=hash_token(plain),
            created_by=created_by,
            queues=clean_names(queues, "queue"),
            tasks=clean_names(tasks, "task"),
        )
        return token, plain


class ApiToken(models.Model):
    name = models.CharField(max_length=100, help_text="who or what uses it, e.g. 'billing service'")
    prefix = models.CharField(max_length=20, db_index=True, editable=False, help_text="its first characters")
    secret_hash = models.CharField(max_length=64, unique=True, editable=False, help_text="SHA-256 of the token")
    scope = models.CharField(
        max_length=16,
        choices=[
            ("read", "read: read everything, change nothing (dashboards, monitoring)"),
            ("submit", "submit: enqueue jobs, and read, cancel, edit and delete its own"),
            ("operate", "operate: everything"),
        ],
        default="submit",
    )
    # Limits (empty: none): the token reaches only jobs of these queues and these tasks, on every route.
    queues = models.JSONField(
        default=list, blank=True, validators=[validate_queue_names],
        help_text="only these queues (a JSON list of names; empty: every queue)",
    )  # fmt: skip
    tasks = models.JSONField(
        default=list, blank=True, validators=[validate_task_names],
        help_text="only these tasks (a JSON list of names; empty: every task)",
    )  # fmt: skip
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
        limits = "".join(
            f", {what} {', '.join(names)}" for what, names in (("queues", self.queues), ("tasks", self.tasks)) if names
        )
        return f"{self.name} ({self.scope}{limits}, {self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def limited(self) -> bool:
        return bool(self.queues or self.tasks)

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
