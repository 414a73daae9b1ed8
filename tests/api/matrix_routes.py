"""The authorization matrix's table (issue 27): for every route and method of the URL configuration, the request
that exercises it and the answer each caller must get. tests/api/test_authorization_matrix.py checks that this
table covers exactly the routes the URL configuration has, and runs every cell against a fresh Redis and database.

Callers of the API's routes (seeds, /api/v1, /metrics):
  anon_prod    no token, API.ANONYMOUS_SEEDS off (production)
  anon_run     no token, API.ANONYMOUS_SEEDS on, from 127.0.0.1 (`make run`; METRICS.ANONYMOUS_LOOPBACK stays
               at its default, off: scripts/run_stack.py does not set it)
  anon_remote  no token, API.ANONYMOUS_SEEDS on, from a non-loopback address
  submit       a submit token, on its own job (the jobs of the world are submitted by this token)
  submit_other another submit token, on the first token's job (only on routes that name a job)
  read         a read token
  operate      an operate token
  limited      an operate token limited to the queue "other" (every job of the world is in another queue)
  limited_in   an operate token limited to the world's queues apitest and apitest.dead (the control of `limited`:
               inside its limits it may do what operate does, except on the routes spanning every queue)
  task_limited an operate token limited to the task "other.task" (no queue limit): as `limited` unless the row
               says otherwise (a queue filter is no way out of a task limit: narrowed, not refused)
  cross_site   the operate token, with `Origin: https://evil.example`
Callers of the console's routes:
  anon         not logged in: a redirect to the login page
  nobody       logged in, no permission
  viewer       the view permission of jobs: pages yes, actions no
  operator     the view permission and every operate_* and purge_* permission

The expected answers follow the policy of issue 27 (docs/api.md, jobconsole_api/access.py) and the choices the
authz work recorded where the policy left room (/work/wt/notes/authz-policy.md during that work: public API
documents, Jobbers' dead letters for a submit token, health probes open to all). Where neither said, the choice
is written beside the row ("choice:").
"""

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis
from django.contrib.auth.models import Permission, User
from django.test import Client as WebClient

from dashboards.views.assets import VERSION as PLOTLY_VERSION
from jobconsole.core.groups import Group
from jobconsole.core.store import Store
from jobconsole.engine import get_client
from jobconsole.models import BulkOperation, PeriodicSchedule
from jobconsole_api.models import ApiToken

API_CALLERS = ("anon_prod", "anon_run", "anon_remote", "submit", "submit_other", "read", "operate", "limited",
               "limited_in", "task_limited", "cross_site")  # fmt: skip
CONSOLE_CALLERS = ("anon", "nobody", "viewer", "operator")

LOGIN = "302 to the login page"
MOVED = "302 elsewhere than the login page"  # a console action done (it redirects back with a message)
type Expected = int | str | frozenset[int]

EVIL_ORIGIN = "https://evil.example"
REMOTE_ADDR = "203.0.113.7"  # TEST-NET-3: not loopback
LIMITED_QUEUE = "other"
WORLD_QUEUES = ["apitest", "apitest.dead"]  # the queues of the jobs the world makes (tests/api/v1/tasks.py)
WAITING = {"task": "apitest.add", "params": {"a": 1}, "delay": 600}  # scheduled: cancellable and editable
UNIQUE_KEY = "matrix/reminder"
MATRIX_WORKER = "matrix-host:1:abcdef"
MATRIX_HOST = "matrix-host"
WORKFLOW = {"steps": [{"name": "first", **WAITING}, {"name": "then", "task": "apitest.add", "params": {"a": 2},
                                                    "after": ["first"]}]}  # fmt: skip


@dataclass
class Request:
    method: str
    path: str
    body: Any = None  # JSON unless `form` (the console's forms)
    form: bool = False
    query: dict[str, Any] = field(default_factory=dict)


class World:
    """The state a cell runs against, made on demand: tokens, and jobs submitted by the `submit` token through
    /api/v1 (so that it owns them as any client's submission would)."""

    def __init__(self, r: "redis.Redis") -> None:
        self.r = r
        self._plain: dict[str, str] = {}
        self._cache: dict[str, Any] = {}

    # --- tokens ---

    def token(self, caller: str) -> str:
        """The plain token of an API caller (the first call issues it)."""
        if caller not in self._plain:
            name, scope, limits = {
                "submit": ("producer", "submit", {}),
                "submit_other": ("other-producer", "submit", {}),
                "read": ("reader", "read", {}),
                "operate": ("ops", "operate", {}),
                "cross_site": ("ops", "operate", {}),
                "limited": ("limited-ops", "operate", {"queues": [LIMITED_QUEUE]}),
                "limited_in": ("scoped-ops", "operate", {"queues": WORLD_QUEUES}),
                "task_limited": ("task-ops", "operate", {"tasks": ["other.task"]}),
            }[caller]
            if caller == "cross_site":
                self._plain[caller] = self.token("operate")
            else:
                self._plain[caller] = ApiToken.objects.issue(name, scope, **limits)[1]
        return self._plain[caller]

    def api(self, caller: str) -> WebClient:
        return WebClient(headers={"Authorization": f"Bearer {self.token(caller)}"})

    def _once(self, key: str, make: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    # --- jobs, owned by the `submit` token ---

    def submit(self, spec: Mapping[str, Any]) -> str:
        response = self.api("submit").post("/api/v1/jobs", json.dumps(spec), content_type="application/json")
        assert response.status_code == 201, ("setting up: the submit token's submission", response.content[:300])
        job_id: str = response.json()["id"]
        return job_id

    def worker(self) -> str:
        """A live worker's registry entry (no process behind it: a control only needs the entry)."""

        def make() -> str:
            info = {"host": MATRIX_HOST, "pid": 1, "queues": "apitest", "concurrency": 2, "state": "running"}
            Store(self.r).register_worker(MATRIX_WORKER, ttl_s=300, now_ms=1_000, info=info)
            return MATRIX_WORKER

        return str(self._once("worker", make))

    def silence(self) -> None:
        """A silence in force of the alarm delay:apitest: (jobconsole/alarms.py)."""
        from jobconsole.alarms import silence

        self._once("silence", lambda: silence("matrix", "delay:apitest:", "1h", "known"))

    def group(self) -> str:
        """The concurrency group "payments", defined."""
        get_client().define_group(Group("payments", connections=2))
        return "payments"

    def waiting_job(self) -> str:
        """A job of the queue apitest due in ten minutes (scheduled): it can be cancelled, edited, deleted."""
        return str(self._once("waiting", lambda: self.submit(WAITING)))

    def queued_job(self) -> str:
        """A job of the queue apitest ready to run (no worker runs in these tests)."""
        return str(self._once("queued", lambda: self.submit({"task": "apitest.add", "params": {"a": 1}})))

    def walrus_job(self) -> str:
        """A job of the queue examples.echo due in ten minutes, with the `payload` parameter Walrus's jobs have."""
        spec = {"task": "examples.echo", "params": {"payload": "x"}, "delay": 600}
        return str(self._once("walrus", lambda: self.submit(spec)))

    def unique_job(self) -> str:
        return str(self._once("unique", lambda: self.submit({**WAITING, "unique_key": UNIQUE_KEY})))

    def own_workflow(self) -> str:
        """A workflow of the queue apitest (its first step due in ten minutes, the second waiting for it), created
        by the submit token through /api/v1: its own (the console's rows use `workflow`, made by the engine)."""

        def make() -> str:
            response = self.api("submit").post(f"{V}/workflows", json.dumps(WORKFLOW), content_type="application/json")
            assert response.status_code == 201, ("setting up: the submit token's workflow", response.content[:300])
            return str(response.json()["id"])

        return str(self._once("own_workflow", make))

    def listed_own_workflow(self) -> str:
        """The submit token's workflow, mirrored (the list of workflows reads the mirror)."""
        workflow_id = self.own_workflow()
        self.mirrored()
        return workflow_id

    def mirrored(self) -> None:
        """Copy Redis's changes to the database (the job search and the dead-letter lists read the mirror)."""
        from jobconsole.mirror.loop import Mirror

        mirror = Mirror(self.r, batch=200, block_ms=20, overlap=False)
        try:
            mirror.drain()
        finally:
            mirror.writer.close()

    def listed_waiting_job(self) -> str:
        """The waiting job, mirrored (so that the job search lists it)."""
        job_id = self.waiting_job()
        self.mirrored()
        return job_id

    def dead_job(self) -> str:
        """A job of the queue apitest.dead that died at its first attempt, mirrored (its dead letter exists)."""

        def make() -> str:
            from tests.mirror_fixtures import run_worker

            job_id = self.submit({"task": "apitest.boom"})
            run_worker(self.r, ["apitest.dead"])
            self.mirrored()
            return job_id

        return str(self._once("dead", make))

    def workflow(self) -> str:
        """A workflow of the queue apitest (b waits for a), mirrored (the workflow pages read the mirror)."""

        def make() -> str:
            from jobconsole.core import JobSpec
            from jobconsole.core.workflows import Step
            from jobconsole.engine import get_client

            made = get_client().enqueue_workflow(
                [Step("a", JobSpec(task="apitest.add", params={"a": 1})),
                 Step("b", JobSpec(task="apitest.add", params={"a": 2}), after=["a"])], name="matrix",
            )  # fmt: skip
            self.mirrored()
            return made.workflow_id

        return str(self._once("workflow", make))

    # --- the rest ---

    def schedule(self) -> str:
        def make() -> str:
            PeriodicSchedule.objects.create(name="tick", task="examples.echo", every_seconds=30, queue="ticks")
            return "tick"

        return str(self._once("schedule", make))

    def operation(self) -> int:
        """A pending bulk operation (a purge of dead letters), as the console's confirmation records it."""

        def make() -> int:
            op = BulkOperation.objects.create(kind=BulkOperation.Kind.PURGE_DEADLETTERS, actor="matrix", total=0)
            return op.pk

        return int(self._once("operation", make))

    def paused_operation(self) -> int:
        def make() -> int:
            op = BulkOperation.objects.create(
                kind=BulkOperation.Kind.PURGE_DEADLETTERS, actor="matrix", total=0, status=BulkOperation.Status.FAILED
            )
            return op.pk

        return int(self._once("paused_operation", make))

    def bulk_confirmation(self) -> str:
        """A genuine confirmation of a purge of the dead letters of apitest.dead, from the console's preview."""
        self.dead_job()
        page = console_client("operator").get("/bulk/new", {"kind": "purge", "queue": "apitest.dead"})
        assert page.status_code == 200, ("setting up: the bulk preview", page.status_code)
        found = re.search(r'name="confirmation" value="([^"]+)"', page.content.decode())
        assert found, "setting up: the preview has no confirmation field"
        return found.group(1)


CONSOLE_PERMISSIONS = {
    "anon": None,
    "nobody": [],
    "viewer": ["view_job"],
    "operator": ["view_job"] + [f"{verb}_{kind}" for verb in ("operate", "purge")
                                for kind in ("job", "deadletter", "queue", "periodicschedule")],
}  # fmt: skip


def console_client(caller: str) -> WebClient:
    browser = WebClient()
    codenames = CONSOLE_PERMISSIONS[caller]
    if codenames is None:
        return browser
    user = User.objects.filter(username=f"matrix-{caller}").first()
    if user is None:
        user = User.objects.create_user(f"matrix-{caller}", is_staff=True)  # no password: no slow hashing
        user.user_permissions.set(Permission.objects.filter(content_type__app_label="jobconsole",
                                                            codename__in=codenames))  # fmt: skip
    browser.force_login(user)
    return browser


@dataclass(frozen=True)
class Row:
    method: str
    route: str  # as the URL configuration spells it, from the site's root
    request: Callable[[World, str], Request]  # (world, caller) -> the request
    expect: Mapping[str, Expected]
    # After the answer: what must (not) have changed, for cells whose status alone proves too little.
    check: Callable[[World, str, Any], None] | None = None
    note: str = ""
    per_owner: bool = False  # a list of jobs: the answer of the other submit token differs (it sees none of them)

    @property
    def key(self) -> tuple[str, str]:
        return (self.method, self.route)

    @property
    def console(self) -> bool:
        return set(self.expect) <= set(CONSOLE_CALLERS)


# --- expectation builders: one per kind of route, from the policy; each row still lists its answers ---------

NO_ANON = {"anon_prod": 401, "anon_run": 401, "anon_remote": 401, "cross_site": 403}


def v1(ok: int, *, submit: Expected, read: Expected, limited: Expected, submit_other: Expected | None = None,
       operate: Expected | None = None, limited_in: Expected | None = None,
       task_limited: Expected | None = None) -> dict[str, Expected]:  # fmt: skip
    """/api/v1: never anonymous. limited_in: as operate unless given (a route spanning every queue: 403);
    task_limited: as limited unless given."""
    cells: dict[str, Expected] = {**NO_ANON, "submit": submit, "read": read, "operate": operate or ok,
                                  "limited": limited, "limited_in": limited_in or operate or ok,
                                  "task_limited": task_limited or limited}  # fmt: skip
    if submit_other is not None:
        cells["submit_other"] = submit_other
    return cells


def seed(ok: int, *, submit: Expected, read: Expected, limited: Expected, submit_other: Expected | None = None,
         anon_run: Expected | None = None, operate: Expected | None = None,
         limited_in: Expected | None = None, task_limited: Expected | None = None) -> dict[str, Expected]:  # fmt: skip
    """A seed route: anonymous callers only under `make run` from the loopback address, with full power."""
    cells: dict[str, Expected] = {
        "anon_prod": 401, "anon_run": anon_run or ok, "anon_remote": 401, "submit": submit, "read": read,
        "operate": operate or ok, "limited": limited, "limited_in": limited_in or operate or ok,
        "task_limited": task_limited or limited, "cross_site": 403,
    }  # fmt: skip
    if submit_other is not None:
        cells["submit_other"] = submit_other
    return cells


def page(viewer: Expected = 200) -> dict[str, Expected]:
    return {"anon": LOGIN, "nobody": 403, "viewer": viewer, "operator": 200}


def action(operator: Expected = MOVED) -> dict[str, Expected]:
    return {"anon": LOGIN, "nobody": 403, "viewer": 403, "operator": operator}


def get(path: str | Callable[[World], str], prepare: Callable[[World], Any] | None = None,
        **query: Any) -> Callable[[World, str], Request]:  # fmt: skip
    def build(w: World, c: str) -> Request:
        if prepare is not None:
            prepare(w)
        return Request("GET", path(w) if callable(path) else path, query=query)

    return build


def send(method: str, path: str | Callable[[World], str], body: Any = None,
         prepare: Callable[[World], Any] | None = None, **query: Any) -> Callable[[World, str], Request]:  # fmt: skip
    def build(w: World, c: str) -> Request:
        if prepare is not None:
            prepare(w)
        return Request(method, path(w) if callable(path) else path, body=body(w) if callable(body) else body,
                       query=query)  # fmt: skip

    return build


def form(path: str | Callable[[World], str], data: Callable[[World], dict[str, Any]] | dict[str, Any] | None = None,
         prepare: Callable[[World], Any] | None = None) -> Callable[[World, str], Request]:  # fmt: skip
    def build(w: World, c: str) -> Request:
        if prepare is not None:
            prepare(w)
        body = data(w) if callable(data) else (data or {})
        return Request("POST", path(w) if callable(path) else path, body=body, form=True)

    return build


def shows(
    job: Callable[[World], str], *, to: tuple[str, ...], not_to: tuple[str, ...]
) -> Callable[[World, str, Any], None]:
    """A list's answer names the job for the callers `to` and does not for the callers `not_to` (a submit token
    lists only its own jobs, a limited token only its queues')."""

    def check(world: World, caller: str, response: Any) -> None:
        if response.status_code != 200:  # a refusal: its status was the cell's answer
            return
        job_id = job(world)
        if caller in to:
            assert job_id in response.content.decode(), f"{caller}: the list must show the job {job_id}"
        if caller in not_to:
            assert job_id not in response.content.decode(), f"{caller}: the list must not show the job {job_id}"

    return check


OWNERS = ("submit", "read", "operate", "limited_in", "anon_run")  # who sees the submit token's jobs in a list
OTHERS = ("submit_other", "limited", "task_limited")  # who must not


def still_waiting(world: World, caller: str, response: Any) -> None:
    """A refused batch cancel left the job as it was."""
    from jobconsole.engine import get_client

    state = get_client().get(world.waiting_job()).state.value
    assert state == "scheduled", f"{caller}: the job must not have been cancelled (it is {state})"


V = "/api/v1"
JOB = "<str:job_id>"
WF = "<str:workflow_id>"
EDIT = {"expected_state": "scheduled", "expected_attempts": 0, "priority": 3}


def waiting(w: World) -> str:
    return w.waiting_job()


def dead(w: World) -> str:
    return w.dead_job()


# fmt: off
ROWS: list[Row] = [
    # --- /api/v1: jobs ---
    Row("POST", f"{V}/jobs", send("POST", f"{V}/jobs", WAITING),
        v1(201, submit=201, read=403, limited=403)),
    Row("POST", f"{V}/jobs/batch", send("POST", f"{V}/jobs/batch", {"jobs": [WAITING]}),
        v1(201, submit=201, read=403, limited=403)),
    Row("GET", f"{V}/jobs", get(f"{V}/jobs", lambda w: w.listed_waiting_job()),
        v1(200, submit=200, submit_other=200, read=200, limited=200), per_owner=True,
        check=shows(waiting, to=OWNERS, not_to=OTHERS), note="a submit token's own jobs, a limited token's queues"),
    Row("GET", f"{V}/jobs/{JOB}", get(lambda w: f"{V}/jobs/{waiting(w)}"),
        v1(200, submit=200, submit_other=404, read=200, limited=404)),
    Row("PATCH", f"{V}/jobs/{JOB}", send("PATCH", lambda w: f"{V}/jobs/{waiting(w)}", EDIT),
        v1(200, submit=200, submit_other=404, read=403, limited=404)),
    Row("DELETE", f"{V}/jobs/{JOB}", send("DELETE", lambda w: f"{V}/jobs/{waiting(w)}"),
        v1(200, submit=200, submit_other=404, read=403, limited=404)),
    Row("POST", f"{V}/jobs/{JOB}/cancel", send("POST", lambda w: f"{V}/jobs/{waiting(w)}/cancel"),
        v1(200, submit=200, submit_other=404, read=403, limited=404)),
    Row("POST", f"{V}/jobs/{JOB}/retry", send("POST", lambda w: f"{V}/jobs/{dead(w)}/retry"),
        v1(200, submit=403, submit_other=403, read=403, limited=404)),
    # A dead job is not running: an allowed caller gets the engine's 409 (a recoverable job needs an expired lease).
    Row("POST", f"{V}/jobs/{JOB}/recover", send("POST", lambda w: f"{V}/jobs/{dead(w)}/recover"),
        v1(409, submit=403, submit_other=403, read=403, limited=404)),
    # choice: /unique finds one job by its key (Runqueue's client deletes its own reminder): a single-job route.
    Row("GET", f"{V}/unique", get(f"{V}/unique", lambda w: w.unique_job(), queue="apitest", key=UNIQUE_KEY),
        v1(200, submit=200, submit_other=404, read=200, limited=404), note="choice: a single-job route (by key)"),
    Row("DELETE", f"{V}/unique", send("DELETE", f"{V}/unique", None, lambda w: w.unique_job(), queue="apitest",
                                      key=UNIQUE_KEY),
        v1(200, submit=200, submit_other=404, read=403, limited=404), note="choice: a single-job route (by key)"),
    # --- /api/v1: workflows (a submit token's own are those it created; a limited token's, every step inside) ---
    Row("POST", f"{V}/workflows", send("POST", f"{V}/workflows", WORKFLOW),
        v1(201, submit=201, read=403, limited=403)),
    Row("GET", f"{V}/workflows", get(f"{V}/workflows", lambda w: w.listed_own_workflow()),
        v1(200, submit=200, submit_other=200, read=200, limited=200), per_owner=True,
        check=shows(lambda w: w.own_workflow(), to=OWNERS, not_to=OTHERS),
        note="a submit token's own workflows, a limited token's whose every job is inside its limits"),
    Row("GET", f"{V}/workflows/{WF}", get(lambda w: f"{V}/workflows/{w.own_workflow()}"),
        v1(200, submit=200, submit_other=404, read=200, limited=404)),
    Row("GET", f"{V}/workflows/{WF}/steps", get(lambda w: f"{V}/workflows/{w.own_workflow()}/steps"),
        v1(200, submit=200, submit_other=404, read=200, limited=404)),
    Row("POST", f"{V}/workflows/{WF}/cancel", send("POST", lambda w: f"{V}/workflows/{w.own_workflow()}/cancel"),
        v1(200, submit=200, submit_other=404, read=403, limited=404)),
    # choice (the brief of the workflows API): a submit token resubmits its own workflow's failed steps, as it
    # cancels it (a single job's retry is operate's).
    Row("POST", f"{V}/workflows/{WF}/resubmit", send("POST", lambda w: f"{V}/workflows/{w.own_workflow()}/resubmit"),
        v1(200, submit=200, submit_other=404, read=403, limited=404), note="choice: submit for its own workflow"),
    # --- /api/v1: queues, workers, flow ---
    Row("GET", f"{V}/queues", get(f"{V}/queues", waiting), v1(200, submit=403, read=200, limited=200, task_limited=403),
        check=shows(lambda w: '"apitest"', to=("read", "operate", "limited_in"), not_to=("limited",))),
    # A queue's pause or limit holds back every task of the queue: a task-limited token may not (as GET /queues,
    # whose figures span every task, refuses it): 403.
    Row("POST", f"{V}/queues/<str:queue>/pause", send("POST", f"{V}/queues/apitest/pause", prepare=waiting),
        v1(200, submit=403, read=403, limited=403)),
    Row("POST", f"{V}/queues/<str:queue>/resume", send("POST", f"{V}/queues/apitest/resume", prepare=waiting),
        v1(200, submit=403, read=403, limited=403)),
    Row("PUT", f"{V}/queues/<str:queue>/limit", send("PUT", f"{V}/queues/apitest/limit", {"limit": 2}, waiting),
        v1(200, submit=403, read=403, limited=403)),
    Row("GET", f"{V}/workers", get(f"{V}/workers"), v1(200, submit=403, read=200, limited=403, limited_in=403)),
    # A worker serves every queue it names: a limited token may not quiet or stop it (as GET /workers).
    Row("POST", f"{V}/workers/<str:worker>/control",
        send("POST", lambda w: f"{V}/workers/{w.worker()}/control", {"action": "quiet"}),
        v1(200, submit=403, read=403, limited=403, limited_in=403)),
    Row("POST", f"{V}/hosts/<str:host>/control",
        send("POST", f"{V}/hosts/{MATRIX_HOST}/control", {"action": "quiet"}, lambda w: w.worker()),
        v1(200, submit=403, read=403, limited=403, limited_in=403)),
    Row("GET", f"{V}/scheduled", get(f"{V}/scheduled", waiting), v1(200, submit=403, read=200, limited=200),
        check=shows(waiting, to=OWNERS, not_to=OTHERS)),
    Row("GET", f"{V}/flow", get(f"{V}/flow"), v1(200, submit=403, read=200, limited=403, limited_in=403)),
    Row("PUT", f"{V}/groups/<str:group>", send("PUT", f"{V}/groups/payments", {"connections": 2}),
        v1(200, submit=403, read=403, limited=403, limited_in=403)),
    # --- /api/v1: alarms (the health spans every queue: not for a limited token) ---
    Row("GET", f"{V}/alarms", get(f"{V}/alarms"), v1(200, submit=403, read=200, limited=403, limited_in=403)),
    Row("POST", f"{V}/alarms/silence",
        send("POST", f"{V}/alarms/silence", {"alarm": "delay:apitest:", "for": "1h", "reason": "known"}),
        v1(200, submit=403, read=403, limited=403, limited_in=403)),
    Row("POST", f"{V}/alarms/lift",
        send("POST", f"{V}/alarms/lift", {"alarm": "delay:apitest:"}, lambda w: w.silence()),
        v1(200, submit=403, read=403, limited=403, limited_in=403)),
    # --- /api/v1: schedules ---
    Row("GET", f"{V}/schedules", get(f"{V}/schedules"), v1(200, submit=403, read=200, limited=403, limited_in=403)),
    Row("GET", f"{V}/schedules/<str:name>", get(lambda w: f"{V}/schedules/{w.schedule()}"),
        v1(200, submit=403, read=200, limited=403, limited_in=403)),
    Row("POST", f"{V}/schedules/<str:name>/enable", send("POST", lambda w: f"{V}/schedules/{w.schedule()}/enable"),
        v1(200, submit=403, read=403, limited=403, limited_in=403)),
    Row("POST", f"{V}/schedules/<str:name>/disable", send("POST", lambda w: f"{V}/schedules/{w.schedule()}/disable"),
        v1(200, submit=403, read=403, limited=403, limited_in=403)),
    Row("POST", f"{V}/schedules/<str:name>/run", send("POST", lambda w: f"{V}/schedules/{w.schedule()}/run"),
        v1(201, submit=403, read=403, limited=403, limited_in=403)),
    # --- /api/v1: dead letters and bulk operations ---
    Row("GET", f"{V}/dead-letters", get(f"{V}/dead-letters", dead), v1(200, submit=403, read=200, limited=200),
        check=shows(dead, to=OWNERS, not_to=OTHERS)),
    # A single-job route (any token): a submit token reads its own job's history, another's is a 404.
    Row("GET", f"{V}/dead-letters/{JOB}/history", get(lambda w: f"{V}/dead-letters/{dead(w)}/history"),
        v1(200, submit=200, submit_other=404, read=200, limited=404)),
    Row("POST", f"{V}/dead-letters/resubmit",
        send("POST", f"{V}/dead-letters/resubmit", {"filter": {"queue": "apitest.dead"}}, dead),
        v1(200, submit=403, read=403, limited=403, task_limited=200),
        note="a filter naming a queue outside the limit: 403; a task limit narrows it"),
    Row("POST", f"{V}/dead-letters/purge",
        send("POST", f"{V}/dead-letters/purge", {"filter": {"queue": "apitest.dead"}}, dead),
        v1(200, submit=403, read=403, limited=403, task_limited=200)),
    Row("GET", f"{V}/operations/<str:operation_id>", get(lambda w: f"{V}/operations/{w.operation()}"),
        v1(200, submit=403, read=200, limited=403, limited_in=403)),
    Row("POST", f"{V}/operations/<str:operation_id>/cancel",
        send("POST", lambda w: f"{V}/operations/{w.operation()}/cancel"),
        v1(200, submit=403, read=403, limited=403, limited_in=403)),
    # --- /api/v1: figures ---
    Row("GET", f"{V}/stats", get(f"{V}/stats"),
        v1(200, submit=403, read=200, limited=200, limited_in=403, task_limited=403),
        note="a token of several queues must name one (?queue=): 403 (notes/authz-policy.md)"),
    Row("GET", f"{V}/series", get(f"{V}/series"), v1(200, submit=403, read=200, limited=403, limited_in=403)),
    Row("GET", f"{V}/series/depth", get(f"{V}/series/depth"),
        v1(200, submit=403, read=200, limited=403, limited_in=403)),
    # --- /api/v1: its documents, and the catch-all ---
    # The document and its page stay public (they hold no data; a browser reading the docs sends no token), but
    # refuse cross-site requests (notes/authz-policy.md: a deviation from a literal reading of policy 3).
    *(Row("GET", f"{V}/{name}", get(f"{V}/{name}"), {**{c: 200 for c in API_CALLERS if c != "submit_other"},
                                                      "cross_site": 403}, note="public")
      for name in ("openapi.json", "docs")),
    # choice: a path that is no route answers 404 to a token; anonymous 401 (nothing is told without a token).
    *(Row(method, f"{V}/(?P<rest>.*)", send(method, f"{V}/no/such/route"), v1(404, submit=404, read=404,
                                                                               limited=404))
      for method in ("GET", "POST", "PUT", "PATCH", "DELETE")),
    # --- the seeds' catch-alls: any other path under a seed's prefix is that seed's own 404, whoever asks (it
    # tells nothing), but a page of another site is refused as on every seed route ---
    *(Row(method, f"/{prefix}(?P<rest>{rest})", send(method, f"/{prefix}no/such/route"),
          {**{c: 404 for c in API_CALLERS if c != "submit_other"}, "cross_site": 403}, note="the seed's own 404")
      for prefix, rest in (("jobber/", ".*"), ("jobbers/", ".*"), ("runqueue/", ".*"), ("schedule/", ".+"))
      for method in ("GET", "POST", "PUT", "PATCH", "DELETE")),
    # --- /metrics (METRICS.ANONYMOUS_LOOPBACK off by default, and `make run` does not turn it on) ---
    Row("GET", "/metrics", get("/metrics"),
        {"anon_prod": 401, "anon_run": 401, "anon_remote": 401, "submit": 403, "read": 200, "operate": 200,
         "limited": 403, "limited_in": 403, "task_limited": 403, "cross_site": 200},
        note="not a seed or /api/v1 route: no cross-site rule"),
    # --- seeds: Go scheduler, Jobber, Walrus, Runqueue ---
    Row("GET", "/health", get("/health"),
        {c: 200 for c in API_CALLERS if c != "submit_other"}, note="choice: a probe, open to every caller"),
    Row("POST", "/jobs", send("POST", "/jobs", {"type": "examples.echo", "payload": "x"}),
        seed(202, submit=202, read=403, limited=403, limited_in=403)),
    # choice: GET /jobs is no seed route: it redirects to the console's job list (which asks for a login).
    Row("GET", "/jobs", get("/jobs"), {c: 301 for c in API_CALLERS if c != "submit_other"},
        note="choice: a redirect to the console, same for everyone"),
    Row("POST", "/jobber/queue", send("POST", "/jobber/queue", {"type": "examples.echo", "payload": "x"}),
        seed(201, submit=201, read=403, limited=403, limited_in=403)),
    Row("POST", "/schedule/", send("POST", "/schedule/", {"job_type": "examples.echo", "payload": "x"}),
        seed(200, submit=200, read=403, limited=403, limited_in=403)),
    Row("PUT", "/schedule/<str:job_id>", send("PUT", lambda w: f"/schedule/{w.walrus_job()}", {"payload": "y"}),
        seed(200, submit=200, submit_other=404, read=403, limited=404, limited_in=404)),
    Row("DELETE", "/schedule/<str:job_id>", send("DELETE", lambda w: f"/schedule/{w.walrus_job()}"),
        seed(200, submit=200, submit_other=404, read=403, limited=404, limited_in=404)),
    Row("POST", "/runqueue/jobs", send("POST", "/runqueue/jobs", {"topic": "examples.echo", "json": {"x": 1}}),
        seed(201, submit=201, read=403, limited=403, limited_in=403)),
    Row("GET", "/runqueue/health", get("/runqueue/health"), seed(200, submit=200, read=200, limited=200)),
    # --- seeds: Jobbers ---
    Row("GET", "/jobbers/", get("/jobbers/"), seed(200, submit=200, read=200, limited=200)),
    Row("POST", "/jobbers/submit-task",
        send("POST", "/jobbers/submit-task", {"name": "apitest.add", "parameters": {"a": 1}}),
        seed(200, submit=200, read=403, limited=403)),
    Row("GET", "/jobbers/task-status/<str:task_id>", get(lambda w: f"/jobbers/task-status/{waiting(w)}"),
        seed(200, submit=200, submit_other=404, read=200, limited=404)),
    Row("POST", "/jobbers/task/<str:task_id>/cancel", send("POST", lambda w: f"/jobbers/task/{waiting(w)}/cancel"),
        seed(200, submit=200, submit_other=404, read=403, limited=404)),
    # Per id: another's job or one outside the limit is "not_found", and stays as it was.
    Row("POST", "/jobbers/tasks/cancel",
        send("POST", "/jobbers/tasks/cancel", lambda w: {"task_ids": [waiting(w)]}),
        seed(200, submit=200, submit_other=200, read=403, limited=200),
        check=lambda w, c, resp: still_waiting(w, c, resp) if c in ("submit_other", "limited") else None),
    # A job list of one queue (the queue is required): a submit token its own, a limited token 403 (the filter
    # names a queue outside its limit).
    Row("GET", "/jobbers/task-list", get("/jobbers/task-list", lambda w: w.queued_job(), queue="apitest"),
        seed(200, submit=200, submit_other=200, read=200, limited=403, task_limited=200), per_owner=True,
        check=shows(lambda w: w.queued_job(), to=OWNERS, not_to=OTHERS)),
    Row("GET", "/jobbers/queues", get("/jobbers/queues", waiting), seed(200, submit=200, read=200, limited=200),
        check=shows(lambda w: '"apitest"', to=("read", "operate", "limited_in"), not_to=("limited",))),
    Row("GET", "/jobbers/queues/<str:role>", get("/jobbers/queues/mailers"),
        seed(200, submit=200, read=200, limited=200)),
    Row("POST", "/jobbers/queues/<str:role>", send("POST", "/jobbers/queues/mailers", ["emails"]),
        seed(200, submit=403, read=403, limited=403, limited_in=403),
        note="choice: a role spans queues: a limited token 403"),
    Row("GET", "/jobbers/roles", get("/jobbers/roles"), seed(200, submit=200, read=200, limited=200)),
    # Jobbers' dead letters are a job list and a job's read: a submit token sees its own (notes/authz-policy.md).
    Row("GET", "/jobbers/dead-letter-queue", get("/jobbers/dead-letter-queue", dead),
        seed(200, submit=200, submit_other=200, read=200, limited=200), per_owner=True,
        check=shows(dead, to=OWNERS, not_to=OTHERS), note="a submit token's own dead tasks"),
    Row("POST", "/jobbers/dead-letter-queue/resubmit",
        send("POST", "/jobbers/dead-letter-queue/resubmit", {"queue": "apitest.dead"}, dead),
        seed(200, submit=403, read=403, limited=403, task_limited=200)),
    Row("GET", "/jobbers/dead-letter-queue/<str:task_id>/history",
        get(lambda w: f"/jobbers/dead-letter-queue/{dead(w)}/history"),
        seed(200, submit=200, submit_other=404, read=200, limited=404)),
    # choice: like task-list (a job list of one required queue), not like v1's aggregate /scheduled.
    Row("GET", "/jobbers/scheduled-tasks", get("/jobbers/scheduled-tasks", waiting, queue="apitest"),
        seed(200, submit=200, submit_other=200, read=200, limited=403, task_limited=200), per_owner=True,
        check=shows(waiting, to=OWNERS, not_to=OTHERS), note="choice: a job list of one queue, like task-list"),
    # --- the console ---
    Row("GET", "/", get("/"), page()),
    Row("GET", "/alarms/", get("/alarms/"), page()),
    Row("POST", "/alarms/silence", form("/alarms/silence", {"alarm": "delay:apitest:", "duration": "1h",
                                                           "reason": "known"}), action()),
    Row("POST", "/alarms/lift", form("/alarms/lift", {"alarm": "delay:apitest:"}, lambda w: w.silence()), action()),
    Row("GET", "/queues/", get("/queues/"), page()),
    Row("GET", "/queues/<str:name>/", get("/queues/apitest/", waiting), page()),
    Row("POST", "/queues/<str:name>/pause", form("/queues/apitest/pause", {"action": "pause"}, waiting), action()),
    Row("GET", "/jobs/", get("/jobs/"), page()),
    Row("GET", "/jobs/<str:job_id>/", get(lambda w: f"/jobs/{waiting(w)}/"), page()),
    Row("POST", "/jobs/<str:job_id>/retry", form(lambda w: f"/jobs/{dead(w)}/retry"), action()),
    Row("POST", "/jobs/<str:job_id>/cancel", form(lambda w: f"/jobs/{waiting(w)}/cancel"), action()),
    Row("POST", "/jobs/<str:job_id>/recover", form(lambda w: f"/jobs/{dead(w)}/recover"), action()),
    Row("POST", "/jobs/<str:job_id>/delete", form(lambda w: f"/jobs/{dead(w)}/delete"), action()),
    Row("POST", "/jobs/<str:job_id>/edit",
        form(lambda w: f"/jobs/{waiting(w)}/edit", {"params": '{"a": 2}', "priority": 1, "expected_state": "scheduled",
                                                    "expected_attempts": 0}),
        action()),
    Row("GET", "/workflows/", get("/workflows/"), page()),
    Row("GET", "/workflows/<str:workflow_id>/", get(lambda w: f"/workflows/{w.workflow()}/"), page()),
    Row("POST", "/workflows/<str:workflow_id>/cancel", form(lambda w: f"/workflows/{w.workflow()}/cancel"), action()),
    Row("GET", "/running/", get("/running/"), page()),
    Row("GET", "/scheduled/", get("/scheduled/"), page()),
    Row("GET", "/schedules/", get("/schedules/"), page()),
    Row("POST", "/schedules/<str:name>/action",
        form(lambda w: f"/schedules/{w.schedule()}/action", {"action": "disable"}), action()),
    Row("GET", "/dead/", get("/dead/"), page()),
    Row("GET", r"/dead/export\.(?P<fmt>csv|json)", get("/dead/export.csv"), page()),
    Row("GET", "/workers/", get("/workers/"), page()),
    Row("POST", "/workers/control", form("/workers/control", lambda w: {"worker": w.worker(), "action": "quiet"}),
        action()),
    Row("GET", "/flow/", get("/flow/"), page()),
    Row("POST", "/flow/limit", form("/flow/limit", {"queue": "apitest", "limit": "3"}, waiting), action()),
    Row("POST", "/flow/group", form("/flow/group", {"group": "payments", "connections": "3"}, lambda w: w.group()),
        action()),
    Row("GET", "/tasks/", get("/tasks/"), page()),
    Row("GET", "/tasks/<str:name>/", get("/tasks/apitest.add/", waiting), page()),
    Row("GET", "/audit/", get("/audit/"), page()),
    Row("GET", "/bulk/", get("/bulk/"), page()),
    # The preview of a purge needs the purge permission of dead letters: a viewer may not even look.
    Row("GET", "/bulk/new", get("/bulk/new", kind="purge", queue="apitest.dead"), page(viewer=403)),
    Row("POST", "/bulk/new", form("/bulk/new", {"kind": "purge", "queue": "apitest.dead"}), page(viewer=403)),
    Row("POST", "/bulk/confirm", form("/bulk/confirm", lambda w: {"confirmation": w.bulk_confirmation()}), action()),
    Row("GET", "/bulk/<int:pk>/", get(lambda w: f"/bulk/{w.operation()}/"), page()),
    Row("GET", "/bulk/<int:pk>/progress.json", get(lambda w: f"/bulk/{w.operation()}/progress.json"), page()),
    Row("POST", "/bulk/<int:pk>/cancel", form(lambda w: f"/bulk/{w.operation()}/cancel"), action()),
    Row("POST", "/bulk/<int:pk>/resume", form(lambda w: f"/bulk/{w.paused_operation()}/resume"), action()),
    # plotly.js, a public static file served by the console (dashboards/views/assets.py): no data, no login.
    Row("GET", "/assets/plotly-basic-<str:version>.min.js", get(f"/assets/plotly-basic-{PLOTLY_VERSION}.min.js"),
        {c: 200 for c in CONSOLE_CALLERS}, note="a static file, public as /static/ is"),
    Row("GET", "/healthz", get("/healthz"), {c: 200 for c in CONSOLE_CALLERS}, note="a probe, open to everyone"),
]
# fmt: on
