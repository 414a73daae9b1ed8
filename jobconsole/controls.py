"""An operator's controls beyond jobs, shared by the console and the HTTP API, each audited: quiet, resume or
stop workers (one, or every one of a host), and edit flow control (a queue's limit, a group's connections and
rate) with the settings' value beside the live one. Bad input is a `ControlError` with a sentence for the
operator, raised before anything changes."""

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser

from jobconsole import audit
from jobconsole.conf import get_config
from jobconsole.core.client import WORKER_ACTIONS
from jobconsole.core.errors import InvalidJob
from jobconsole.core.groups import PERIODS_MS, Group
from jobconsole.core.queries.workers import WorkerInfo
from jobconsole.engine import get_client

type Actor = AbstractBaseUser | AnonymousUser | str | None

REASON_MAX = 1000
# What each action does, in the words of the console's messages and the audit log.
DOES = {
    "quiet": "quiet: it takes no new jobs and finishes the ones it runs",
    "resume": "resumed: it takes jobs again",
    "stop": "stopping: it takes no new jobs, and leaves once its running jobs end (by each task's on_shutdown)",
}


class ControlError(ValueError):
    """Refused input (a 400 in the API and the console), or `status` 404 for a worker or group not there."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


# --- workers ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkerControl:
    action: str
    outcomes: dict[str, str]  # worker id -> done, already (or missing, for an id asked by name)
    workers: list[WorkerInfo]  # the workers it named, as they are now

    @property
    def changed(self) -> int:
        return sum(1 for o in self.outcomes.values() if o == "done")


def control_workers(
    user: Actor, action: str, *, worker: str | None = None, host: str | None = None, reason: str = ""
) -> WorkerControl:
    """Quiet, resume or stop one live worker (`worker`) or every live worker of `host`; audited as
    `worker_<action>`. A worker acts on it at its next registry renewal (within about 2 s)."""
    if action not in WORKER_ACTIONS:
        raise ControlError(f"Unknown action {action[:40]!r}: choose quiet, resume or stop.")
    if (worker is None) == (host is None):
        raise ControlError("Name one worker or one host.")
    client = get_client()
    if worker is not None:
        outcomes = client.control_workers([worker], action)
        if outcomes[worker] == "missing":
            raise ControlError(f"No live worker {worker[:200]!r}: it has left or is gone.", status=404)
    else:
        assert host is not None
        outcomes = client.control_host(host, action)
        if not outcomes:
            raise ControlError(f"No live worker on host {host[:200]!r}.", status=404)
    result = WorkerControl(action, outcomes, [w for w in client.queries.workers.all() if w.id in outcomes])
    detail: dict[str, Any] = {"workers": outcomes}
    if host is not None:
        detail["host"] = host
    audit.record(user, f"worker_{action}", count=result.changed, reason=reason[:REASON_MAX], detail=detail)
    return result


# --- flow control ------------------------------------------------------------------------------------------


def configured_limits() -> dict[str, int]:
    """Queue limits as the settings give them (JOBCONSOLE["QUEUE_LIMITS"]); every runworker start writes them."""
    return dict(get_config()["QUEUE_LIMITS"])


def configured_groups() -> dict[str, Group]:
    """Concurrency groups as the settings give them (JOBCONSOLE["GROUPS"])."""
    return {name: Group.parse(name, spec) for name, spec in get_config()["GROUPS"].items()}


def whole(raw: Any, what: str, *, minimum: int) -> int:
    """A whole number from a form or a JSON body, at least `minimum`, or a ControlError naming `what`."""
    if isinstance(raw, bool):
        raise ControlError(f"{what} must be a whole number, got {raw!r}.")
    if isinstance(raw, str):
        text = raw.strip()
        if not text.isdigit() or len(text) > 9:
            raise ControlError(f"{what} must be a whole number of at least {minimum}, got {raw[:40]!r}.")
        raw = int(text)
    if not isinstance(raw, int) or raw < minimum:
        raise ControlError(f"{what} must be a whole number of at least {minimum}, got {raw!r}.")
    return raw


def set_queue_limit(user: Actor, queue: str, limit: int | None, *, reason: str = "") -> None:
    """Cap the queue's running jobs across all workers (None lifts the cap); audited as `set_queue_limit`."""
    if queue not in get_client().queries.queues.names():
        raise ControlError(f"No queue {queue[:200]!r}: no job or worker has used it.", status=404)
    try:
        get_client().set_queue_limit(queue, limit)
    except InvalidJob as exc:
        raise ControlError(str(exc)) from exc
    audit.record(user, "set_queue_limit", queue=queue, detail={"limit": limit}, count=0, reason=reason[:REASON_MAX])


def define_group(user: Actor, name: str, spec: dict[str, Any], *, reason: str = "", known: bool = False) -> Group:
    """Set a group's limits now (`spec` as in the settings); audited as `define_group`. `known`: only a group
    already defined (the console edits those; the API may define new ones)."""
    if known and name not in {g.name for g in get_client().queries.queues.flow_control().groups}:
        raise ControlError(f"No concurrency group {name[:200]!r}.", status=404)
    try:
        group = Group.parse(name, spec)
    except ValueError as exc:
        raise ControlError(str(exc)) from exc
    get_client().define_group(group)
    audit.record(user, "define_group", detail={"group": name, **spec}, count=0, reason=reason[:REASON_MAX])
    return group


def group_spec_from_form(name: str, form: Any) -> dict[str, Any]:
    """The console's group form (connections; rate: requests, per, unit; blank rate: none) as a settings spec."""
    spec: dict[str, Any] = {"connections": whole(form.get("connections") or "0", "Connections", minimum=0)}
    requests = (form.get("requests") or "").strip()
    if requests and requests != "0":
        n = whole(requests, "Requests", minimum=1)
        per = whole(form.get("per") or "1", "The rate's period", minimum=1)
        unit = (form.get("unit") or "second").strip()
        if unit not in PERIODS_MS:
            raise ControlError(f"The rate's unit must be second, minute or hour, got {unit[:40]!r}.")
        spec["requests"] = [n, per, unit]
    if not spec["connections"] and "requests" not in spec:
        raise ControlError(f"Group {name}: give connections (at least 1), a rate, or both.")
    return spec
