"""Who may do what through the API: one policy for every route, the seeds', /api/v1's and /metrics'.

Scopes (a token has one): `read` reads everything and changes nothing (dashboards, monitoring, status bots);
`submit` submits jobs and sees, cancels, edits and deletes only the jobs it submitted (another's job is a 404,
as an unknown id, so its existence cannot be probed); `operate` does everything and includes the other two.
A route needs one of these requirements: `any` (any valid token), `read`, `submit` or `operate`.

Limits: a token may be limited to queues and to tasks (ApiToken.queues / .tasks, empty: no limit). A job outside
them is not there for the token (404); submitting outside them, or a filter or a per-queue change naming a
queue outside them, is a 403; a route showing every queue that cannot be narrowed refuses a limited token (403).

Anonymous callers (API.ANONYMOUS_SEEDS, the development stack's switch) reach the seed routes only, and only
from the loopback address with no proxy's forwarding headers; they keep every power there (the dev stack's
operator), audited as "api:anonymous".

Cross-site requests (an Origin naming another site, or Sec-Fetch-Site: cross-site) are refused on every seed and
/api/v1 route before anything is read: with anonymous access on, any web page the operator visits could
otherwise post to the seed routes (they read JSON from text/plain and form bodies, which need no preflight).
"""

import ipaddress
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from django.http import HttpRequest

from jobconsole.engine import get_client
from jobconsole_api.models import ApiToken, SubmittedJob
from jobconsole_api.problems import Problem

# What each scope includes: operate includes read and submit; read and submit are incomparable.
INCLUDES: dict[str, frozenset[str]] = {
    "read": frozenset({"read"}),
    "submit": frozenset({"submit"}),
    "operate": frozenset({"read", "submit", "operate"}),
}
ANY = "any"  # a route any valid token may call (a submit token then sees only its own jobs)
REQUIREMENTS = (ANY, "read", "submit", "operate")
ANONYMOUS_ACTOR = "api:anonymous"
CHALLENGE = 'Bearer realm="jobconsole"'

# A proxy that forwards a request says so in one of these; such a request came from elsewhere.
FORWARDING_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")


def check_requirement(requirement: str) -> str:
    if requirement not in REQUIREMENTS:
        raise ValueError(f"unknown scope {requirement!r}")
    return requirement


def scope_allows(scope: str, requirement: str) -> bool:
    return requirement == ANY or requirement in INCLUDES.get(scope, frozenset())


def from_loopback(request: HttpRequest) -> bool:
    """A request from 127.0.0.0/8 or ::1 that no proxy says it forwarded (a proxy on this host would make every
    outside request look local, but says so in its forwarding headers)."""
    if any(request.META.get(h) for h in FORWARDING_HEADERS):
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


# --- cross-site requests -----------------------------------------------------------------------------------

DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_parts(url: str) -> tuple[str, str, int | None] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    return scheme, parts.hostname.lower(), port if port is not None else DEFAULT_PORTS.get(scheme)


def check_same_site(request: HttpRequest) -> None:
    """Refuse (403) a request a browser sent from another site: its Origin is not this site's scheme, host and
    port, or it says Sec-Fetch-Site: cross-site. Requests without these headers (curl, programs) pass."""
    if request.META.get("HTTP_SEC_FETCH_SITE", "").strip().lower() == "cross-site":
        raise Problem(403, "A cross-site request (Sec-Fetch-Site: cross-site) is refused: a web page of another "
                           "site may not call this API; nothing was read or changed.")  # fmt: skip
    origin = request.META.get("HTTP_ORIGIN")
    if origin is None:
        return
    own = f"{'https' if request.is_secure() else 'http'}://{request.get_host()}"
    if origin.strip().lower() == "null" or _origin_parts(origin) != _origin_parts(own):
        raise Problem(
            403,
            f"A cross-site request (Origin {origin[:200]!r} is not this site, {own}) is refused: a web page of "
            "another site may not call this API; nothing was read or changed.",
        )


# --- the caller ----------------------------------------------------------------------------------------------


class JobLike(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def queue(self) -> str: ...
    @property
    def task(self) -> str: ...


@dataclass(frozen=True)
class Caller:
    """Who calls: a token, or (token None) the anonymous caller of the seed routes under API.ANONYMOUS_SEEDS."""

    token: ApiToken | None

    @property
    def anonymous(self) -> bool:
        return self.token is None

    @property
    def actor(self) -> str:
        """How the audit log names the caller."""
        return ANONYMOUS_ACTOR if self.token is None else self.token.actor

    def allows(self, requirement: str) -> bool:
        return self.token is None or scope_allows(self.token.scope, check_requirement(requirement))

    def require(self, requirement: str) -> None:
        """403 unless the caller's scope meets `requirement`."""
        if self.token is None or self.allows(requirement):
            return
        needed = {"read": "'read' (or 'operate')", "submit": "'submit' (or 'operate')"}.get(
            requirement, repr(requirement)
        )
        raise Problem(
            403,
            f"The token {self.token.prefix}… has the scope {self.token.scope!r}; this route needs {needed}.",
            headers={"WWW-Authenticate": f'{CHALLENGE}, error="insufficient_scope", scope="{requirement}"'},
        )

    @property
    def may_operate(self) -> bool:
        return self.allows("operate")

    @property
    def may_read_all(self) -> bool:
        """Whether the caller sees every job (within its limits), not only the ones it submitted."""
        return self.allows("read")

    # --- limits

    @property
    def queue_limits(self) -> frozenset[str]:
        return frozenset(self.token.queues) if self.token is not None else frozenset()

    @property
    def task_limits(self) -> frozenset[str]:
        return frozenset(self.token.tasks) if self.token is not None else frozenset()

    @property
    def limited(self) -> bool:
        return bool(self.queue_limits or self.task_limits)

    def limits_text(self) -> str:
        parts = [f"{what}: {', '.join(sorted(names))}" for what, names in
                 (("queues", self.queue_limits), ("tasks", self.task_limits)) if names]  # fmt: skip
        return "; ".join(parts) or "none"

    def _outside(self, what: str) -> Problem:
        assert self.token is not None
        return Problem(403, f"{what} is outside the token's limits (the token {self.token.prefix}… may reach "
                            f"only {self.limits_text()}).")  # fmt: skip

    def within(self, queue: str, task: str) -> bool:
        return (not self.queue_limits or queue in self.queue_limits) and (
            not self.task_limits or task in self.task_limits
        )

    def check_queue(self, queue: str | None) -> None:
        """403 for a filter or a per-queue change naming a queue outside the limits."""
        if queue is not None and self.queue_limits and queue not in self.queue_limits:
            raise self._outside(f"The queue {queue!r}")

    def check_queue_change(self, queue: str) -> None:
        """403 for a change to a whole queue (pause, resume, its limit) outside the queue limits, or by a token
        limited to tasks: the queue holds other tasks' jobs too, which the change would hold back."""
        self.check_queue(queue)
        if self.token is not None and self.task_limits:
            raise self._outside(f"Changing the whole queue {queue!r} (it holds every task's jobs)")

    def check_task(self, task: str | None) -> None:
        """403 for a filter naming a task outside the limits."""
        if task is not None and self.task_limits and task not in self.task_limits:
            raise self._outside(f"The task {task!r}")

    def check_submit(self, task: str, queue: str | None = None) -> None:
        """403 when a job of `task` into `queue` (None: the task's own) is outside the limits; call it before
        anything is enqueued. An unknown task is left to the engine, which refuses it."""
        if not self.limited:
            return
        if self.task_limits and task not in self.task_limits:
            raise self._outside(f"Submitting the task {task!r} was refused, nothing was enqueued: it")
        if self.queue_limits:
            target = queue
            if target is None:
                registered = get_client().registry.find(task)
                target = registered.queue if registered is not None else None
            if target is not None and target not in self.queue_limits:
                raise self._outside(f"Submitting into the queue {target!r} was refused, nothing was enqueued: it")

    def visible_queues(self, queues: Iterable[str]) -> list[str]:
        """The queues among `queues` inside the queue limits."""
        return [q for q in queues if not self.queue_limits or q in self.queue_limits]

    def check_unlimited(self, what: str = "This route shows every queue") -> None:
        """403 for a limited token on a route that spans every queue and cannot be narrowed to its limits."""
        if self.token is not None and self.limited:
            raise Problem(403, f"{what}; the token {self.token.prefix}… is limited ({self.limits_text()}) and may "
                               "not use it. Use a token without queue or task limits.")  # fmt: skip

    # --- jobs

    def owned(self, job_ids: Collection[str]) -> set[str]:
        """Those of `job_ids` this caller's token submitted."""
        if self.token is None or not job_ids:
            return set()
        return set(
            SubmittedJob.objects.filter(token=self.token, job_id__in=list(job_ids)).values_list("job_id", flat=True)
        )

    def sees_job(self, job_id: str, queue: str, task: str) -> bool:
        """Whether the job is there for this caller: inside its limits, and its own unless it may read all."""
        if not self.within(queue, task):
            return False
        return self.may_read_all or bool(self.owned([job_id]))

    def visible[J: JobLike](self, jobs: Sequence[J]) -> list[J]:
        """The jobs this caller sees, in order (one database query for a submit token)."""
        inside = [j for j in jobs if self.within(j.queue, j.task)]
        if self.may_read_all:
            return inside
        own = self.owned([j.id for j in inside])
        return [j for j in inside if j.id in own]

    def remember(self, job_ids: Sequence[str]) -> None:
        """Record the jobs a token that does not read everything submitted: the jobs it may see and change.
        (Tokens that read every job need no record, so their submissions cost no database write.)"""
        if self.token is None or self.may_read_all or not job_ids:
            return
        SubmittedJob.objects.bulk_create(
            [SubmittedJob(job_id=job_id, token=self.token) for job_id in job_ids], ignore_conflicts=True
        )
