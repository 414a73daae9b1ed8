"""The kinds of bulk operation: what each one acts on, the engine action it runs, and who may start it."""

from dataclasses import dataclass
from typing import Any, Literal

from jobconsole.core.batch import BatchAction
from jobconsole.models import BulkOperation

Target = Literal["deadletter", "job"]
Kind = BulkOperation.Kind


@dataclass(frozen=True)
class KindSpec:
    kind: Kind
    target: Target  # the mirror table its selection filters: DeadLetter or Job
    action: BatchAction
    permission: str  # jobconsole.<codename>, the admin's permission for the same action
    verb: str  # for messages: "Resubmitted 1,000 of 1,002"
    audit_action: str
    options: tuple[str, ...] = ()  # the options it takes

    @property
    def label(self) -> str:
        return str(self.kind.label)

    def allowed(self, user: Any) -> bool:
        """`user`: request.user (a User or an AnonymousUser; django-stubs types it as neither)."""
        return bool(user.is_authenticated and user.is_active and user.has_perm(self.permission))


_SPECS = (
    KindSpec(Kind.RESUBMIT_DEADLETTERS, "deadletter", BatchAction.RESUBMIT, "jobconsole.operate_deadletter",
             "Resubmitted", "bulk_resubmit", ("reset_attempts", "spread_seconds")),
    KindSpec(Kind.PURGE_DEADLETTERS, "deadletter", BatchAction.PURGE, "jobconsole.purge_deadletter", "Purged",
             "bulk_purge"),
    KindSpec(Kind.RETRY_JOBS, "job", BatchAction.RETRY, "jobconsole.operate_job", "Retried", "bulk_retry",
             ("reset_attempts",)),
    KindSpec(Kind.CANCEL_JOBS, "job", BatchAction.CANCEL, "jobconsole.operate_job", "Cancelled", "bulk_cancel"),
    KindSpec(Kind.DELETE_JOBS, "job", BatchAction.DELETE, "jobconsole.purge_job", "Deleted", "bulk_delete"),
)  # fmt: skip
KINDS: dict[str, KindSpec] = {spec.kind.value: spec for spec in _SPECS}


# The short names the console's pages use (dead letters: resubmit, purge; jobs: retry, cancel, delete).
ALIASES = {
    "resubmit": Kind.RESUBMIT_DEADLETTERS.value, "purge": Kind.PURGE_DEADLETTERS.value, "retry": Kind.RETRY_JOBS.value,
    "cancel": Kind.CANCEL_JOBS.value, "delete": Kind.DELETE_JOBS.value,
}  # fmt: skip


class UnknownKind(ValueError):
    pass


def kind_spec(name: str) -> KindSpec:
    """The spec of a kind, by its name or short name; UnknownKind (with a message to show) otherwise."""
    try:
        return KINDS[ALIASES.get(name, name)]
    except KeyError:
        known = ", ".join(ALIASES)
        raise UnknownKind(f"Unknown bulk operation {name!r}; it is one of {known}.") from None
