"""Jobs that wait for other jobs: a workflow is a DAG of named steps created in one atomic call; `depends_on` links
one job to jobs already enqueued. Users' guide: docs/workflows.md; keys and scripts: lua/_deps.lua.

A dependent waits (state `waiting`) until every parent ended. Per parent, what a parent that does not complete
(dead, failed, cancelled, dropped, deleted) does to it: `cancel` it (the default, and its own dependents in
turn), or `run` it anyway. The script that ends a job releases its dependents in the same call, so nothing can
end in between, and each edge is released once whatever is repeated. A dependent may be given its parents'
results in its params (`pass_results`).
"""

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis

from jobconsole.core import keys
from jobconsole.core.errors import InvalidJob
from jobconsole.core.ids import check_job_id, new_job_ids
from jobconsole.core.results import EnqueueResult
from jobconsole.core.scripts import Arg
from jobconsole.core.states import JobState

if TYPE_CHECKING:
    from jobconsole.core.client import Client, JobSpec
    from jobconsole.core.queries import Queries
    from jobconsole.core.store import Store

log = logging.getLogger(__name__)

CANCEL = "cancel"  # a parent that did not complete cancels the dependent (and its dependents in turn)
RUN = "run"  # the dependent runs anyway once every parent ended (RQ's allow_dependency_failures)
POLICIES = (CANCEL, RUN)
# pass_results values besides a parameter's name (which receives {parent step: result, ...}):
ARGS = "*args"  # the parent's result first in params["args"] (a list of results for several parents)
ARGS_LIST = "*args-list"  # a list of the parents' results (in `after` order) first in params["args"]
# when: a dependent runs once every parent ended (ALL_ENDED, under each edge's policy), or as soon as one parent
# does not complete (FIRST_FAILURE: a batch's death callback; cancelled once every parent completed).
ALL_ENDED = "all_ended"
FIRST_FAILURE = "first_failure"
KEEP_SECONDS = 30 * 86_400.0  # how long a workflow's record lasts (its jobs follow their own retention)
MAX_STEPS = 100_000

type Parent = "str | EnqueueResult | tuple[str, str]"


class InvalidWorkflow(InvalidJob):
    """A workflow was described wrongly; `step` names the step at fault (None: the whole). Nothing was enqueued."""

    def __init__(self, message: str, step: str | None = None) -> None:
        super().__init__(f"step {step!r}: {message}" if step is not None else message)
        self.step = step


@dataclass(frozen=True)
class Step:
    """One named job of a workflow. `after`: the steps it waits for, as names (each under `on_parent_failure`)
    or as {name: "cancel" | "run"}. `pass_results`: None, ARGS, ARGS_LIST, or the name of a parameter that gets
    {parent step: result} (null for a parent that did not complete). `when`: ALL_ENDED or FIRST_FAILURE."""

    name: str
    spec: "JobSpec"
    after: Sequence[str] | Mapping[str, str] = ()
    on_parent_failure: str = CANCEL
    pass_results: str | None = None
    when: str = ALL_ENDED

    def parents(self) -> dict[str, str]:
        """The steps it waits for, in order, each with its policy."""
        if isinstance(self.after, Mapping):
            return dict(self.after)
        if isinstance(self.after, str):
            return {self.after: self.on_parent_failure}
        return dict.fromkeys(self.after, self.on_parent_failure)


@dataclass(frozen=True)
class WorkflowResult:
    workflow_id: str
    queue: str  # where its record lives (the first step's queue): Queries.workflows.get, Client.cancel_workflow
    job_ids_by_step: dict[str, str]
    states_by_step: dict[str, JobState] = field(default_factory=dict)  # as created (empty when not created now)
    created: bool = True  # False: a workflow of this id existed already (a repeated call); nothing was written


@dataclass(frozen=True)
class WorkflowStep:
    name: str
    queue: str
    job_id: str
    state: JobState | None  # None: the job is gone (retention)


@dataclass(frozen=True)
class WorkflowView:
    """A workflow as Redis holds it now (`Queries.workflows.get`)."""

    id: str
    name: str
    queue: str
    created_at: int  # Redis ms
    cancelled_at: int | None
    steps: list[WorkflowStep]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.steps:
            key = s.state.value if s.state else "gone"
            out[key] = out.get(key, 0) + 1
        return out


@dataclass(frozen=True)
class ParentLink:
    queue: str
    job_id: str
    step: str  # the parent's step name ('' for a depends_on parent)
    policy: str  # CANCEL or RUN
    ended: str  # the state the parent ended in, as its dependent recorded it; '' while it has not


@dataclass(frozen=True)
class JobLinks:
    """A job's parents (in order) and dependents (`Queries.workflows.links`)."""

    parents: list[ParentLink]
    children: list[tuple[str, str]]  # (queue, job id)


def decode_links(deps: Mapping[str, str], ended: Mapping[str, str], children: Iterable[str]) -> JobLinks:
    parents = []
    for ref, value in deps.items():
        policy, index, step = value.split("|", 2)
        queue, _, job_id = ref.partition("|")
        parents.append((int(index), ParentLink(queue, job_id, step, policy, ended.get(ref, ""))))
    kids = sorted((q, i) for q, _, i in (c.lstrip(">").partition("|") for c in children))  # ">": another slot
    return JobLinks([p for _, p in sorted(parents, key=lambda x: x[0])], kids)


@dataclass(frozen=True)
class Node:
    """One job of a workflow.lua call."""

    queue: str
    id: str
    step: str
    args: list[Arg]  # the whole per-job block of workflow.lua
    parents: tuple[str, ...] = ()  # its parents' refs ("<queue>|<id>")

    @property
    def ref(self) -> str:
        return f"{self.queue}|{self.id}"


def order_steps(steps: Sequence[Step]) -> list[Step]:
    """Steps with parents before dependents (given order otherwise kept); refuses duplicates, unknown steps and
    cycles, naming the step."""
    by_name: dict[str, Step] = {}
    for s in steps:
        if not isinstance(s, Step):
            raise InvalidWorkflow(f"a workflow is made of Step objects, got {type(s).__name__}")
        if not isinstance(s.name, str) or not keys.NAME_PATTERN.match(s.name):
            raise InvalidWorkflow("a step name is 1 to 100 letters, digits, '_', '.' or '-'", s.name)
        if s.name in by_name:
            raise InvalidWorkflow("two steps have this name", s.name)
        by_name[s.name] = s
    parents = {s.name: s.parents() for s in steps}
    remaining = {name: set(p) for name, p in parents.items()}
    for s in steps:
        for parent, policy in parents[s.name].items():
            if parent not in by_name:
                raise InvalidWorkflow(f"waits for {parent!r}, which is not a step of this workflow", s.name)
            if parent == s.name:
                raise InvalidWorkflow("waits for itself", s.name)
            if policy not in POLICIES:
                raise InvalidWorkflow(f"on_parent_failure must be 'cancel' or 'run', got {policy!r}", s.name)
    ordered: list[Step] = []
    done: set[str] = set()
    while len(ordered) < len(steps):
        ready = [s for s in steps if s.name not in done and remaining[s.name] <= done]
        if not ready:
            cycle = _cycle(by_name, [s.name for s in steps if s.name not in done])
            raise InvalidWorkflow(f"a cycle: {' waits for '.join([*cycle, cycle[0]])}", cycle[0])
        for s in ready:
            ordered.append(s)
            done.add(s.name)
    return ordered


def _cycle(by_name: Mapping[str, Step], stuck: list[str]) -> list[str]:
    """One cycle among steps that could not be ordered, as names in order."""
    at, seen = stuck[0], []
    while at not in seen:
        seen.append(at)
        at = next(p for p in by_name[at].parents() if p in stuck)
    return seen[seen.index(at) :]


def _with_results(spec: "JobSpec", mode: str | None, step: str) -> tuple["JobSpec", str, int | None]:
    """The spec whose params have the parents' results' place first (filled with an empty value of the right
    type for validation), the pass mode for the script, and how many bytes of the encoded params come before it."""
    from dataclasses import replace

    if mode is None:
        return spec, "", None
    params = dict(spec.params or {})
    if mode in (ARGS, ARGS_LIST):
        args = params.pop("args", [])
        if not isinstance(args, list):
            raise InvalidWorkflow("pass_results='*args' needs params with an 'args' list (a call's params)", step)
        return replace(spec, params={"args": [None, *args], **params}), "one" if mode == ARGS else "list", 9
    if not isinstance(mode, str) or not mode.isidentifier():
        raise InvalidWorkflow(f"pass_results must be None, '*args', '*args-list' or a parameter name; got {mode!r}",
                              step)  # fmt: skip
    if mode in params:
        raise InvalidWorkflow(f"pass_results names the parameter {mode!r}, which its params give already", step)
    return replace(spec, params={mode: {}, **params}), "dict", len(b"{" + json.dumps(mode).encode() + b":")


def node_args(
    client: "Client", spec: "JobSpec", *, step: str, parents: Sequence[tuple[str, str, str]],
    pass_results: str | None, job_id: str, when: str = ALL_ENDED,
) -> Node:  # fmt: skip
    """The per-job block of workflow.lua for one job: validated as `Client.enqueue` validates (raises InvalidJob,
    as InvalidWorkflow naming the step), with its parents (ref, policy, parent's step name)."""
    if spec.unique_key:
        raise InvalidWorkflow("a job of a workflow (or with depends_on) cannot have a unique_key", step)
    if pass_results is not None and not parents:
        raise InvalidWorkflow("pass_results needs a parent to take results from", step)
    if when not in (ALL_ENDED, FIRST_FAILURE):
        raise InvalidWorkflow(f"when must be {ALL_ENDED!r} or {FIRST_FAILURE!r}; got {when!r}", step)
    if when == FIRST_FAILURE and not parents:
        raise InvalidWorkflow("when='first_failure' needs parents", step)
    spec, mode, splice_at = _with_results(spec, pass_results, step)
    try:
        prepared = client._prepare(spec, job_id)
    except InvalidWorkflow:
        raise
    except InvalidJob as exc:
        raise InvalidWorkflow(str(exc), step) from None
    a = prepared.args
    pairs = list(a[7:])
    if splice_at is not None:
        params = str(pairs[3])
        placeholder = "[null" if mode != "dict" else "{}"
        start = splice_at - (1 if mode != "dict" else 0)
        assert params.encode()[start : start + len(placeholder)] == placeholder.encode(), params
        # The stored params hold `null` where the results go until the release puts them in (lua/_deps.lua).
        head = params.encode()[:splice_at]
        tail = params.encode()[splice_at + (4 if mode != "dict" else 2) :]
        pairs[3] = (head + b"null" + tail).decode()
    block: list[Arg] = [
        prepared.queue, prepared.id, a[1], a[2], a[3], a[4], step, mode, "" if splice_at is None else splice_at,
        "failure" if when == FIRST_FAILURE else "", len(parents),
    ]  # fmt: skip
    for ref, policy, parent_step in parents:
        block += [ref, policy, parent_step]
    block += [a[6], *pairs]
    return Node(prepared.queue, prepared.id, step, block, tuple(ref for ref, _, _ in parents))


def plan(client: "Client", steps: Iterable[Step]) -> list[Node]:
    """Every step validated and ordered into workflow.lua's blocks (job ids made here unless a spec has one)."""
    ordered = order_steps(list(steps))
    if not ordered:
        raise InvalidWorkflow("a workflow needs at least one step")
    if len(ordered) > MAX_STEPS:
        raise InvalidWorkflow(f"a workflow has at most {MAX_STEPS} steps; got {len(ordered)}")
    refs: dict[str, str] = {}
    nodes: list[Node] = []
    for s, fresh in zip(ordered, new_job_ids(len(ordered)), strict=True):
        job_id = check_job_id(s.spec.id) if s.spec.id is not None else fresh
        parents = [(refs[p], policy, p) for p, policy in s.parents().items()]
        node = node_args(
            client, s.spec, step=s.name, parents=parents, pass_results=s.pass_results, job_id=job_id, when=s.when
        )
        refs[s.name] = f"{node.queue}|{node.id}"
        nodes.append(node)
    return nodes


def parent_ref(client: "Client", parent: Any) -> tuple[str, str]:
    """(queue, id) of a depends_on entry: an EnqueueResult, a (queue, id) pair, or a job id (located)."""
    if isinstance(parent, EnqueueResult):
        return parent.queue, parent.id
    if isinstance(parent, tuple) and len(parent) == 2 and all(isinstance(p, str) for p in parent):
        queue, job_id = parent
        if not keys.NAME_PATTERN.match(queue):
            raise InvalidJob(f"invalid queue name {queue!r}")
        return queue, check_job_id(job_id)
    if isinstance(parent, str):
        return client.locate(check_job_id(parent)), parent
    raise InvalidJob(f"depends_on takes job ids, EnqueueResults or (queue, id) pairs; got {parent!r}")


def decode_view(workflow_id: str, record: dict[str, str], states: Sequence[str | None]) -> WorkflowView:
    steps = []
    members = [(f.removeprefix("step:"), v) for f, v in record.items() if f.startswith("step:")]
    for (name, ref), state in zip(members, states, strict=True):
        queue, _, job_id = ref.partition("|")
        steps.append(WorkflowStep(name, queue, job_id, JobState(state) if state else None))
    cancelled = record.get("cancelled_at")
    return WorkflowView(
        id=workflow_id, name=record.get("name", ""), queue=record.get("queue", ""),
        created_at=int(record.get("created_at") or 0), cancelled_at=int(cancelled) if cancelled else None,
        steps=steps,
    )  # fmt: skip


def members(record: Mapping[str, str]) -> list[tuple[str, str]]:
    """(queue, job id) of each step in a workflow's record."""
    return [tuple(v.split("|", 1)) for f, v in record.items() if f.startswith("step:")]  # type: ignore[misc]


# --- Redis Cluster: a workflow spanning slots (docs/architecture.md, "Crossing slots") -----------------------------
# Each step below is one script in one slot; what a crash between two of them leaves is finished or undone by
# maintenance (`recover_creations`, `relay`), so each step is idempotent.
CREATION_DEADLINE_MS = 30_000  # a creation not done by then is the maintenance leader's to roll back or finish
RELAY_GRACE_MS = 5_000  # an applied message is applied once more after this (its child's primary may have died
# before its replica had the first), then dropped
RELAY_BATCH = 500


def create_in_parts(
    client: "Client", workflow_id: str, name: str, keep_ms: int, nodes: Sequence[Node]
) -> list[str] | dict[str, str] | None:
    """Create a workflow whose jobs span slots: the record (marked `creating`) in the home queue's slot, each
    queue's part with its roots held, the record committed, the roots released, the mark dropped. Nothing runs
    before every part is in. Returns each job's state; None: a workflow of this id exists already (nothing
    written); or, for a repeated call while the first one's creation is not done (it died, or lost its
    connection), the job ids by step it recorded: plan again with them and call again, which finishes it.
    InvalidWorkflow: refused, and whatever was placed is taken out again."""
    store, home = client.store, nodes[0].queue
    steps: list[Arg] = [x for n in nodes for x in (n.step, n.ref)]
    begun = store.workflow_parts("begin", home, workflow_id, name, home, keep_ms, CREATION_DEADLINE_MS, *steps)
    if begun == "exists":
        return None
    if begun != "begun":
        recorded = dict(zip(begun[1::2], begun[2::2], strict=True))
        if recorded != {n.step: n.ref for n in nodes}:
            return {step: ref.partition("|")[2] for step, ref in recorded.items()}
    parts = _parts(nodes)
    queue_of = {n.ref: n.queue for n in nodes}
    for queue, part in parts.items():
        links = [(p.partition("|")[2], n.ref) for n in nodes if n.queue != queue for p in n.parents
                 if queue_of[p] == queue]  # fmt: skip
        call = store.workflow_part_call(
            queue, workflow_id, home=home, count=len(part), blocks=[a for n in part for a in n.args],
            remote_parents=sorted({p for n in part for p in n.parents if queue_of[p] != queue}), remote_links=links,
        )  # fmt: skip
        try:
            reply = store.run(call)
        except redis.exceptions.OutOfMemoryError:  # workflow.lua has no allow-oom: this part wrote nothing
            roll_back(store, home, workflow_id, parts)
            raise
        if reply[0] == "taken":
            roll_back(store, home, workflow_id, parts)
            raise InvalidWorkflow(
                f"job id {reply[1]} is taken by another job", next(n.step for n in nodes if n.id == reply[1])
            )
    if store.workflow_parts("commit", home, workflow_id) != "open":  # too slow: maintenance is rolling it back
        roll_back(store, home, workflow_id, parts)
        raise InvalidWorkflow("the workflow's creation was rolled back (it took longer than its deadline); try again")
    opened = _open(store, home, workflow_id, parts)
    return [opened.get(n.id) or JobState.WAITING.value for n in nodes]


def _parts(nodes: Iterable[Node]) -> dict[str, list[Node]]:
    parts: dict[str, list[Node]] = {}
    for n in nodes:
        parts.setdefault(n.queue, []).append(n)
    return parts


def _open(store: "Store", home: str, workflow_id: str, parts: Mapping[str, Sequence[Node]]) -> dict[str, str]:
    """The held roots of every part released; their states by id."""
    states: dict[str, str] = {}
    for queue, part in parts.items():
        roots = [n.id for n in part if not n.parents]
        states.update(zip(roots, store.workflow_parts("open", queue, workflow_id, *roots), strict=True))
    store.workflow_parts("done", home, workflow_id)
    return states


def roll_back(store: "Store", home: str, workflow_id: str, parts: Mapping[str, Sequence[Node]]) -> bool:
    """Take a creation not yet open back out (its record marked aborting first, so that a late creator cannot
    open it); False when it is open already (then it is finished instead)."""
    if store.workflow_parts("abort", home, workflow_id) == "open":
        _open(store, home, workflow_id, parts)
        return False
    for queue, part in parts.items():
        store.workflow_parts("unplace", queue, workflow_id, *[n.id for n in part])
    store.workflow_parts("done", home, workflow_id)
    return True


def recover_creations(store: "Store", queries: "Queries", home: str) -> int:
    """The maintenance leader's pass over the creations homed in this queue that are past their deadline: rolled
    back while placing, finished once open. Every step is idempotent, so two of these at once do no harm."""
    done = 0
    for workflow_id in store.creations_due(home):
        refs = queries.workflows.members(workflow_id, home)
        parts: dict[str, list[Node]] = {}
        for queue, job_id in refs:  # the held ones are the roots: `open` picks them, `unplace` takes every one
            parts.setdefault(queue, []).append(Node(queue, job_id, "", []))
        rolled = roll_back(store, home, workflow_id, parts)
        log.warning("workflow %s: creation %s by maintenance", workflow_id, "rolled back" if rolled else "finished")
        done += 1
    return done


def relay(store: "Store", queue: str, *, ahead_ms: int = 0) -> int:
    """Move the due messages of this queue's outbox (parents here, children in other slots) to their children:
    applied in each child's slot, then acknowledged here. A child's node that fails is tried again next time.
    Returns the number acknowledged."""
    total = 0
    while True:
        reply = store.run(store.relay_call("due", queue, ahead_ms, RELAY_BATCH))
        by_queue: dict[str, list[str]] = {}
        for field_name, message in zip(reply[::2], reply[1::2], strict=True):
            by_queue.setdefault(field_name.partition("|")[0], []).extend((field_name, message))
        acked: list[Arg] = []
        for child_queue, items in by_queue.items():
            try:
                store.run(store.relay_call("apply", child_queue, *items))
            except redis.RedisError as exc:  # that node is down or failing over: the next pass applies them
                log.warning("workflow outbox of %s: applying to %s failed (%s); retried", queue, child_queue, exc)
                continue
            acked += items
        if acked:
            store.run(store.relay_call("ack", queue, RELAY_GRACE_MS, *acked))
        total += len(acked) // 2
        if len(reply) < 2 * RELAY_BATCH or not acked:
            return total
