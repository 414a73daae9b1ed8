"""The producer and operator side of the engine: enqueue, inspect, cancel, requeue, pause."""

import json
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, cast

import redis
from redis.exceptions import OutOfMemoryError

from jobconsole.core import keys, workflows
from jobconsole.core.connection import require_decoded
from jobconsole.core.errors import InvalidJob, JobNotFound, JobStateConflict, NotReplicated, RedisFull, UnknownTask
from jobconsole.core.groups import Group
from jobconsole.core.idempotency import IdempotencyRecords
from jobconsole.core.ids import check_job_id, new_job_id, new_job_ids
from jobconsole.core.job import Job
from jobconsole.core.priority import parse_priority
from jobconsole.core.queries import Queries
from jobconsole.core.queries.queues import QueueCounts
from jobconsole.core.results import EnqueueResult
from jobconsole.core.scripts import Arg
from jobconsole.core.states import JobState
from jobconsole.core.store import INTAKE_MAX, Appended, Call, Store
from jobconsole.core.tasks import DeadLetterPolicy, Task, TaskRegistry, default_registry
from jobconsole.core.timing import MAX_DELAY_SECONDS, TOO_FAR, parse_run_at
from jobconsole.core.workflows import InvalidWorkflow, Step, WorkflowResult

log = logging.getLogger(__name__)

WORKER_ACTIONS = ("quiet", "resume", "stop")  # Client.control_workers

MAX_PARAMS_BYTES = 1_000_000
MAX_UNIQUE_KEY = 200
MAX_RETRIES = 1000  # retries after the first attempt a job may be given
SCRIPT_BATCH = 250  # jobs per enqueue script call
DEFAULT_SPIN_US = 200  # an enqueue spins this long at most for its reply instead of sleeping (core/wire.py)


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """One job to enqueue (for `Client.enqueue_many`; `Client.enqueue` takes the same fields)."""

    task: str
    params: dict[str, Any] | None = None
    id: str | None = None
    queue: str | None = None
    priority: int | str | None = None
    delay: float | None = None  # seconds
    run_at: datetime | str | list[Any] | tuple[Any, ...] | None = None  # aware; ISO 8601; Runqueue's [n, unit]
    max_retries: int | None = None
    unique_key: str | None = None
    group: str | None = None  # concurrency group; None: the task's, "" none
    unique_until: str | None = None  # "end" (the job ends) or "start" (it starts); None: the task's


@dataclass(frozen=True, slots=True)
class _Prepared:
    queue: str
    args: list[Arg] = field(default_factory=list)
    id: str = ""
    may_take_intake: bool = False  # id made here, no unique key, due now: see enqueue.lua


@dataclass(frozen=True, slots=True)
class _TaskDefaults:
    """What every job of one task shares, worked out once per client instead of once per enqueue."""

    task: Task | None
    queue: str
    priority: int
    max_retries: int
    needs_params: bool  # the signature has required parameters, so {} is refused
    fields: tuple[Arg, ...]  # hash fields after queue/params/max_retries; defaults are left out

    @classmethod
    def of(cls, name: str, task: Task | None) -> "_TaskDefaults":
        fields: list[Arg] = ["lease_ms", int((task.visibility_timeout if task else 30.0) * 1000)]
        if task is not None and task.version != 1:
            fields += ["version", task.version]
        if task is not None and task.timeout:
            fields += ["timeout_ms", int(task.timeout * 1000)]
        if task is not None and task.dead_letter_policy is DeadLetterPolicy.DISCARD:
            fields += ["dead_letter", str(task.dead_letter_policy)]
        if task is not None and task.group:
            fields += ["group", task.group]
        queue = task.queue if task else name
        if not keys.NAME_PATTERN.match(queue):
            raise InvalidJob(f"invalid queue name {queue!r}")
        return cls(
            task=task, queue=queue, priority=parse_priority(task.priority if task else 0),
            max_retries=_check_max_retries(task.max_retries if task else 3),
            needs_params=task is not None and task.needs_params, fields=tuple(fields),
        )  # fmt: skip


def _without(fields: tuple[Arg, ...], name: str) -> tuple[Arg, ...]:
    """Hash field pairs without the pair named `name`."""
    pairs = zip(fields[::2], fields[1::2], strict=True)
    return tuple(item for pair in pairs if pair[0] != name for item in pair)


class Client:
    """Talks to Redis for producers and operators. Thread-safe (redis-py's pool)."""

    def __init__(
        self,
        connection: "redis.Redis",
        registry: TaskRegistry | None = None,
        *,
        strict: bool = True,
        events_maxlen: int = 100_000,
        finished_ttl: float = 86_400.0,
        spin_us: int = DEFAULT_SPIN_US,
        replicas: int = 0,
        replicas_timeout: float = 1.0,
    ) -> None:
        require_decoded(connection)
        if spin_us < 0:
            raise ValueError("spin_us must be 0 (never spin) or more")
        if replicas < 0 or replicas_timeout <= 0:
            raise ValueError("replicas must be 0 (do not wait) or more, and replicas_timeout above 0 seconds")
        # replicas > 0: every enqueue is followed by Redis's WAIT in the same round trip and raises NotReplicated
        # unless that many replicas acknowledged it within replicas_timeout (0: no WAIT, nothing added).
        self.replicas = replicas
        self.replicas_timeout_ms = max(1, int(replicas_timeout * 1000))
        self.spin_s = spin_us / 1e6  # an enqueue's wait for its reply (core/wire.py)
        self.redis = connection
        self.store = Store(connection, events_maxlen=events_maxlen)
        self.queries = Queries(self.store)
        self.idempotency = IdempotencyRecords(connection)  # the HTTP API's Idempotency-Key records
        self.registry = registry if registry is not None else default_registry
        self.strict = strict  # refuse task names this process has not registered
        self.events_maxlen = events_maxlen
        self.finished_ttl_ms = int(finished_ttl * 1000)
        self._known_queues: set[str] = set()
        self._defaults: dict[str, _TaskDefaults] = {}
        # Queues whose last single enqueue met no worker waiting idle: the next takes the plain XADD; the others
        # (a queue this client has not enqueued on yet too) enqueue_one.lua, which hands a job straight to such a
        # worker (see _enqueue_one).
        self._appending: set[str] = set()

    # --- enqueue ----------------------------------------------------------------------------------

    def enqueue(
        self,
        task: str,
        params: dict[str, Any] | None = None,
        *,
        depends_on: "Sequence[workflows.Parent] | None" = None,
        allow_dependency_failures: bool = False,
        pass_results: str | None = None,
        **options: Any,
    ) -> EnqueueResult:
        """Enqueue one job; see JobSpec for the options. Raises InvalidJob (nothing enqueued) on bad input.
        `depends_on`: jobs (ids, EnqueueResults or (queue, id) pairs) it waits for (state `waiting`) until each
        ended; one that does not complete cancels it unless `allow_dependency_failures` (core/workflows.py)."""
        if depends_on is not None:
            spec = JobSpec(task=task, params=params, **options)
            return self._enqueue_dependent(spec, depends_on, allow_dependency_failures, pass_results)
        p = self._prepare(JobSpec(task=task, params=params, **options))
        try:
            if p.queue not in self._known_queues:
                self._register_queues({p.queue})
            taken, acknowledged = self._enqueue_one(p) if p.may_take_intake else (None, 0)
            if taken is None:  # not of the intake kind, or enqueue_one.lua left it to the full script
                [result], acknowledged = self._run_enqueue(self.store.enqueue_call(p.queue, 1, False, p.args))
            else:
                result = taken
        except OutOfMemoryError as exc:  # refused before anything was written (neither script has allow-oom)
            raise RedisFull([p.id]) from exc
        if acknowledged < self.replicas:
            raise NotReplicated([result], acknowledged, self.replicas)
        return result

    def _enqueue_one(self, p: _Prepared) -> tuple[EnqueueResult | None, int]:
        """The usual job (see _Prepared.may_take_intake): an intake entry or a hand-off to an idle worker, or None
        when enqueue_one.lua left it to enqueue.lua (nothing written).
        While the queue's workers are busy (its last enqueue met none waiting idle) the entry is a plain XADD,
        which costs Redis and this process a fraction of a script; while some wait idle, enqueue_one.lua leases
        the job to one of them in the same step, so pick-up costs no claim. Either way is correct for any state
        of the queue: the choice only picks the cheaper one, and a stale one costs one wake-up or one script."""
        a = p.args  # see _prepare: the entry's pairs are the task, the priority and the hash's pairs
        pairs = ["task", a[1], "priority", a[2], *a[7:]]
        if p.queue in self._appending:
            appended = self.store.append_intake(
                p.queue, p.id, pairs, replicas=self.replicas, timeout_ms=self.replicas_timeout_ms, spin_s=self.spin_s
            )
            self._after_append(p.queue, appended)
            return EnqueueResult(p.id, p.queue, JobState.QUEUED, "created"), appended.acknowledged
        taken, acknowledged = self._run_enqueue(self.store.enqueue_one_call(p.queue, p.id, pairs))
        if taken == 1:  # no worker waits idle: plain appends from now on
            self._appending.add(p.queue)
        if not taken:
            return None, acknowledged
        return EnqueueResult(
            p.id, p.queue, JobState.QUEUED if taken == 1 else JobState.RUNNING, "created"
        ), acknowledged

    def _after_append(self, queue: str, appended: Appended) -> None:
        """The job is accepted; what follows only keeps pick-up fast and the intake short, so a Redis error here
        is logged, not raised (raising would invite a resend of an accepted job). Without the wake-up an idle
        worker claims the job at the end of its blocking pop (at most idle.LONGEST_BLOCK_S); without the drain
        the next enqueue or claim drains."""
        try:
            if appended.idle:
                self._appending.discard(queue)
                self.store.wake_queue(queue)
            if appended.waiting >= INTAKE_MAX:  # as enqueue_one.lua's refusal would have it drained
                self.store.drain(queue)
        except redis.RedisError as exc:
            log.warning("enqueue on %s: the job is in; waking a worker or draining the intake failed: %s", queue, exc)

    def _enqueue_dependent(
        self, spec: JobSpec, depends_on: "Sequence[workflows.Parent]", allow: bool, pass_results: str | None
    ) -> EnqueueResult:
        if isinstance(depends_on, (str, EnqueueResult)):
            depends_on = [depends_on]
        parents = list(dict.fromkeys(workflows.parent_ref(self, p) for p in depends_on))
        if not parents:
            raise InvalidJob("depends_on names no job")
        policy = workflows.RUN if allow else workflows.CANCEL
        job_id = check_job_id(spec.id) if spec.id is not None else new_job_id()
        node = workflows.node_args(
            self, spec, step="", parents=[(f"{q}|{i}", policy, "") for q, i in parents], pass_results=pass_results,
            job_id=job_id,
        )  # fmt: skip
        queues = {node.queue} | {q for q, _ in parents}
        self._check_slots(queues)
        reply = self._run_workflow(node.queue, "", "", 0, [node], queues)
        if reply[0] == "taken":
            known = self.queries.jobs.get(node.id, node.queue, history=False)
            return EnqueueResult(node.id, node.queue, known.state, "exists")
        if reply[0] == "missing":
            raise JobNotFound(f"depends_on: no job {reply[1].partition('|')[2]} in queue {reply[1].partition('|')[0]}")
        return EnqueueResult(node.id, node.queue, JobState(reply[1]), "created")

    def enqueue_workflow(
        self, steps: Iterable[Step], *, name: str = "", id: str | None = None, keep: float = workflows.KEEP_SECONDS
    ) -> WorkflowResult:
        """Create a workflow, a DAG of named steps, in one atomic call: all of it or nothing (InvalidWorkflow
        names the step at fault: an unknown task, bad params, a cycle, a missing step). Roots are queued; the
        others wait for their parents (core/workflows.py). `id` (a ULID) makes a repeated call idempotent; `keep`:
        seconds the workflow's record lasts."""
        if not isinstance(name, str) or len(name) > 200 or any(ord(c) < 32 for c in name):
            raise InvalidWorkflow("a workflow name is at most 200 printable characters")
        workflow_id = check_job_id(id) if id is not None else new_job_id()
        steps = list(steps)
        nodes = workflows.plan(self, steps)
        queues = {n.queue for n in nodes}
        home = nodes[0].queue
        if self.store.cluster and len(queues) > 1:  # its queues are in different slots: created in steps
            if queues - self._known_queues:
                self._register_queues(queues - self._known_queues)
            try:
                made = workflows.create_in_parts(self, workflow_id, name, int(keep * 1000), nodes)
                if isinstance(made, dict):  # an unfinished creation of this id: finished with its own job ids
                    recorded = made
                    steps = [replace(s, spec=replace(s.spec, id=recorded.get(s.name))) for s in steps]
                    nodes = workflows.plan(self, steps)
                    made = workflows.create_in_parts(self, workflow_id, name, int(keep * 1000), nodes)
            except OutOfMemoryError as exc:
                raise RedisFull([n.id for n in nodes]) from exc
            if isinstance(made, dict):
                raise InvalidWorkflow(f"workflow {workflow_id} is being created with other steps")
            reply = ["created", *made] if made is not None else ["exists"]
        else:
            reply = self._run_workflow(home, workflow_id, name, int(keep * 1000), nodes, queues)
        if reply[0] == "exists":
            view = self.queries.workflows.get(workflow_id, home)
            found = {s.name: s.job_id for s in view.steps} if view else {}
            return WorkflowResult(workflow_id, home, found, created=False)
        if reply[0] == "taken":
            step = next(n.step for n in nodes if n.id == reply[1])
            raise InvalidWorkflow(f"job id {reply[1]} is taken by another job", step)
        if reply[0] == "missing":
            raise InvalidWorkflow(f"waits for job {reply[1]}, which does not exist")
        ids = {n.step: n.id for n in nodes}
        states = {n.step: JobState(s) for n, s in zip(nodes, reply[1:], strict=True)}
        return WorkflowResult(workflow_id, home, ids, states)

    def cancel_workflow(self, workflow_id: str, queue: str) -> tuple[int, int]:
        """Cancel every member of a workflow that has not started, ask the running ones to stop: (cancelled,
        asked). `queue`: WorkflowResult.queue. JobNotFound for an unknown workflow."""
        parts: dict[str, list[str]] = {}
        for q, job_id in self.queries.workflows.members(workflow_id, queue):
            parts.setdefault(q, []).append(job_id)
        for q in parts:
            self.store.drain(q)
        if not (self.store.cluster and len(parts) > 1):
            cancelled, asked = self.store.workflow_cancel(queue, workflow_id, ttl_ms=self.finished_ttl_ms)
            if cancelled < 0:
                raise JobNotFound(f"no workflow {workflow_id} in queue {queue}")
            return cancelled, asked
        # Spanning slots: the record marked, each queue's members cancelled in their own slot, then what their
        # ends tell children in other slots relayed (after every part, so no `run` dependent starts meanwhile).
        if self.store.workflow_cancel(queue, workflow_id, ttl_ms=self.finished_ttl_ms, mode="mark")[0] < 0:
            raise JobNotFound(f"no workflow {workflow_id} in queue {queue}")
        cancelled = asked = 0
        for q, ids in parts.items():
            c, a = self.store.workflow_cancel(q, workflow_id, ttl_ms=self.finished_ttl_ms, mode="part", job_ids=ids)
            cancelled, asked = cancelled + c, asked + a
        for q in parts:
            workflows.relay(self.store, q, ahead_ms=10_000)
        return cancelled, asked

    def _check_slots(self, queues: set[str]) -> None:
        if self.store.cluster and len(queues) > 1:
            raise InvalidWorkflow(
                "on Redis Cluster a job with depends_on and its parents must share one queue (a workflow may span "
                f"queues); these span {', '.join(sorted(queues))}"
            )

    def _run_workflow(
        self, home: str, workflow_id: str, name: str, keep_ms: int, nodes: "Sequence[workflows.Node]", queues: set[str]
    ) -> list[str]:
        new_queues = queues - self._known_queues
        blocks: list[Arg] = []
        for n in nodes:
            blocks.extend(n.args)
        call = self.store.workflow_call(home, workflow_id, name=name, keep_ms=keep_ms, count=len(nodes), blocks=blocks)
        try:
            if new_queues:
                self._register_queues(new_queues)
            return self.store.run(call)
        except OutOfMemoryError as exc:  # workflow.lua has no allow-oom: refused before anything was written
            raise RedisFull([n.id for n in nodes]) from exc

    def _run_enqueue[T](self, call: Call[T]) -> tuple[T, int]:
        """One enqueue call, its reply spun for (wire.py), with WAIT in the same round trip when `replicas` asks
        for it: the decoded reply, and how many replicas acknowledged (0 when not asked)."""
        if not self.replicas:
            return self.store.run(call, spin_s=self.spin_s), 0
        [reply], acknowledged = self.store.run_replicated(
            [call], self.replicas, self.replicas_timeout_ms, spin_s=self.spin_s
        )
        if isinstance(reply, Exception):
            raise reply
        return cast(T, reply), acknowledged

    def enqueue_many(self, specs: Iterable[JobSpec], batch_size: int = 1000) -> list[EnqueueResult]:
        """Enqueue many jobs with one round trip per batch. Every spec is validated before anything is sent.
        RedisFull once Redis refuses a batch: it says which jobs went in; no later batch is sent."""
        specs = list(specs)
        ids = new_job_ids(len(specs))  # used only by specs without an id of their own
        prepared = [self._prepare(spec, job_id) for spec, job_id in zip(specs, ids, strict=True)]
        results: list[EnqueueResult] = []
        for start in range(0, len(prepared), batch_size):
            try:
                results.extend(self._send(prepared[start : start + batch_size]))
            except RedisFull as full:
                unsent = [p.id for p in prepared[start + batch_size :]]
                raise RedisFull(full.refused + unsent, results + full.accepted) from full.__cause__
            except NotReplicated as slow:
                unsent = [p.id for p in prepared[start + batch_size :]]
                raise NotReplicated(results + slow.accepted, slow.acknowledged, slow.wanted, unsent) from None
        return results

    def check(self, spec: JobSpec) -> str:
        """Validate a job without enqueuing it; returns its queue. Raises InvalidJob."""
        return self._prepare(spec).queue

    def _prepare(self, spec: JobSpec, new_id: str = "") -> _Prepared:
        """Validate one spec into its script arguments. `new_id` is its id when it brings none (one of a
        batch made together); otherwise one is made here."""
        task = self.registry.find(spec.task)
        if task is None and self.strict:
            raise UnknownTask(f"unknown task {spec.task!r}")
        defaults = self._defaults.get(spec.task)
        if defaults is None or defaults.task is not task:
            defaults = self._defaults[spec.task] = _TaskDefaults.of(spec.task, task)
        params = spec.params
        if params is None or (type(params) is dict and not params):  # the common case: skip the encoder
            if defaults.needs_params:
                encode_params({}, task)  # raises the missing-parameter error
            params_json = "{}"
        else:
            params_json = encode_params(params, task)
        queue = defaults.queue
        if spec.queue is not None:
            queue = spec.queue
            if not keys.NAME_PATTERN.match(queue):
                raise InvalidJob(f"invalid queue name {queue!r}")
        job_id = check_job_id(spec.id) if spec.id is not None else (new_id or new_job_id())
        delay, run_at = spec.delay, spec.run_at
        if run_at is not None and not isinstance(run_at, datetime):  # ISO 8601 text, or Runqueue's [n, unit]
            if delay is not None:
                raise InvalidJob("give delay or run_at, not both")
            timing = parse_run_at(run_at)
            delay, run_at = timing.delay, timing.run_at
        timed = delay is not None or run_at is not None
        priority = defaults.priority if spec.priority is None else parse_priority(spec.priority)
        max_retries = defaults.max_retries if spec.max_retries is None else _check_max_retries(spec.max_retries)
        delay_ms, run_at_ms = _timing(delay, run_at) if timed else ("", "")
        unique_key = spec.unique_key or ""
        if unique_key and (len(unique_key) > MAX_UNIQUE_KEY or any(ord(c) < 32 for c in unique_key)):
            raise InvalidJob(f"unique_key must be at most {MAX_UNIQUE_KEY} printable characters")
        fields = defaults.fields
        until = defaults.task.unique_until if spec.unique_until is None and defaults.task else spec.unique_until
        if until not in (None, "end", "start"):
            raise InvalidJob(f"unique_until must be 'end' or 'start'; got {until!r}")
        if unique_key and until == "start":
            fields = (*fields, "unique_until", "start")
        in_group = bool(defaults.task is not None and defaults.task.group)
        if spec.group is not None:  # the job's own group replaces its task's ("" leaves it in none)
            in_group = bool(spec.group)
            if spec.group and not keys.NAME_PATTERN.match(spec.group):
                raise InvalidJob(f"invalid group name {spec.group!r}")
            fields = (*_without(fields, "group"), *(("group", spec.group) if spec.group else ()))
        args: list[Arg] = [
            job_id, spec.task, priority, delay_ms, run_at_ms, unique_key, len(fields) // 2 + 3,
            "queue", queue, "params", params_json, "max_retries", max_retries, *fields,
        ]  # fmt: skip
        # A group's job needs a slot before it can start: never the intake's hand-off to an idle worker.
        return _Prepared(queue, args, job_id, spec.id is None and not unique_key and not timed and not in_group)

    def _send(self, batch: Sequence[_Prepared]) -> list[EnqueueResult]:
        by_queue: dict[str, list[_Prepared]] = {}
        for p in batch:
            by_queue.setdefault(p.queue, []).append(p)
        calls: list[Call[list[EnqueueResult]]] = []
        chunks: list[list[_Prepared]] = []
        for queue, items in by_queue.items():
            for start in range(0, len(items), SCRIPT_BATCH):  # smaller scripts overlap with sending the rest
                chunk = items[start : start + SCRIPT_BATCH]
                args: list[Arg] = []
                for p in chunk:
                    args.extend(p.args)
                may_take_intake = len(chunk) == 1 and chunk[0].may_take_intake
                calls.append(self.store.enqueue_call(queue, len(chunk), may_take_intake, args))
                chunks.append(chunk)
        new_queues = set(by_queue) - self._known_queues
        try:
            if new_queues:
                self._register_queues(new_queues)
            if self.replicas:
                replies, acknowledged = self.store.run_replicated(calls, self.replicas, self.replicas_timeout_ms)
            else:
                replies = self.store.run_many(calls)
        except OutOfMemoryError as exc:
            raise RedisFull([p.id for p in batch]) from exc
        found: dict[str, EnqueueResult] = {}
        full: OutOfMemoryError | None = None
        for chunk, reply in zip(chunks, replies, strict=True):
            if isinstance(reply, OutOfMemoryError):  # this chunk wrote nothing; others may have gone in
                full = reply
                continue
            if isinstance(reply, Exception):
                raise reply
            for p, result in zip(chunk, reply, strict=True):
                found[p.id] = result
        if full is not None:
            refused = [p.id for p in batch if p.id not in found]
            raise RedisFull(refused, [found[p.id] for p in batch if p.id in found]) from full
        if self.replicas and acknowledged < self.replicas:
            raise NotReplicated([found[p.id] for p in batch], acknowledged, self.replicas)
        return [found[p.id] for p in batch]

    def _register_queues(self, queues: set[str]) -> None:
        # Registered before the jobs so the recoverer and the console always see the queue.
        self.store.register_queues(queues)
        self._known_queues |= queues

    # --- inspect (core/queries/ has the whole read API) -------------------------------------------

    def queues(self) -> list[str]:
        return self.queries.queues.names()

    def materialize(self, queue: str) -> int:
        """Turn the queue's intake entries into jobs now (see drain_intake in _lib.lua); returns how many.
        Reads and operator actions do this first, so a job a fast enqueue accepted is always visible."""
        return self.store.drain(queue)

    def locate(self, job_id: str) -> str:
        return self.queries.jobs.locate(job_id)

    def get(self, job_id: str, queue: str | None = None, *, history: bool = True) -> Job:
        return self.queries.jobs.get(job_id, queue, history=history)

    def counts(self, queue: str) -> QueueCounts:
        return self.queries.queues.counts(queue)

    def job_ids(self, queue: str, state: JobState, limit: int = 100) -> list[str]:
        return self.queries.jobs.ids_in(queue, state, limit)

    def job_queue(self, job_id: str, queue: str | None = None) -> str:
        """The queue holding a job, with its intake drained, so a script can act on the job."""
        if queue is None:
            return self.locate(job_id)
        self.materialize(queue)
        return queue

    # --- operate ----------------------------------------------------------------------------------

    def cancel(self, job_id: str, queue: str | None = None) -> str:
        """Cancel a waiting job ('cancelled') or ask a running one to stop ('requested')."""
        outcome = self.store.cancel(self.job_queue(job_id, queue), job_id, ttl_ms=self.finished_ttl_ms)
        return self._outcome(job_id, outcome, ("cancelled", "requested"), "cancel")

    def requeue(self, job_id: str, queue: str | None = None, *, reset_attempts: bool = False) -> None:
        """Run a waiting job now, or bring back a dead, failed, dropped or cancelled job (history kept)."""
        outcome = self.store.requeue(self.job_queue(job_id, queue), job_id, reset_attempts=reset_attempts)
        self._outcome(job_id, outcome, ("queued",), "requeue")

    def delete(self, job_id: str, queue: str | None = None, *, expected_state: JobState | None = None) -> None:
        """Delete a job that is not running, with its history; with `expected_state`, only while it is in that
        state (JobStateConflict otherwise)."""
        queue = self.job_queue(job_id, queue)
        outcome = self.store.run(self.store.delete_call(queue, job_id, expected_state=expected_state or ""))
        self._outcome(job_id, outcome, ("deleted",), "delete")

    def find_unique(self, queue_or_task: str, unique_key: str) -> Job | None:
        """The live job holding `unique_key` in a queue (or a registered task's queue), or None."""
        queue = self._unique_queue(queue_or_task)
        holder = self.store.unique_holder(queue, unique_key)
        return self.queries.jobs.get(holder, queue) if holder else None

    def delete_unique(self, queue_or_task: str, unique_key: str) -> str | None:
        """Delete the job holding `unique_key` before it runs (Runqueue's "delete the reminder"); returns its id,
        None when no live job holds the key. JobStateConflict when it already runs (cancel it instead)."""
        queue = self._unique_queue(queue_or_task)
        self.store.drain(queue)
        status, job_id = self.store.delete_unique(queue, unique_key)
        if status == "missing":
            return None
        if status != "deleted":
            raise JobStateConflict(job_id, status.removeprefix("is:"), f"delete it by its unique key {unique_key!r}")
        return job_id

    def _unique_queue(self, queue_or_task: str) -> str:
        task = self.registry.find(queue_or_task)
        queue = task.queue if task is not None else queue_or_task
        if not keys.NAME_PATTERN.match(queue):
            raise InvalidJob(f"invalid queue name {queue!r}")
        return queue

    # --- workers: an operator's quiet, resume and stop (core/worker/control.py) ------------------------

    def control_workers(self, worker_ids: Sequence[str], action: str) -> dict[str, str]:
        """'quiet', 'resume' or 'stop' each of these live workers, in one round trip (each atomic on its own):
        worker id -> 'done', 'already' or 'missing'. A worker acts on it at its next registry renewal."""
        if action not in WORKER_ACTIONS:
            raise InvalidJob(f"unknown worker action {action!r}: quiet, resume or stop")
        ids = list(dict.fromkeys(worker_ids))
        replies = self.store.run_many([self.store.control_worker_call(w, action) for w in ids])
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return dict(zip(ids, replies, strict=True))

    def control_host(self, host: str, action: str) -> dict[str, str]:
        """The same action on every live worker registered from `host` (runworker's JOBCONSOLE_HOST_ID, or the
        host name); {} when none is."""
        ids = [w.id for w in self.queries.workers.all() if w.host == host and w.state != "gone"]
        return self.control_workers(ids, action) if ids else {}

    # --- flow control (core/groups.py) ------------------------------------------------------------

    def define_group(self, group: Group) -> None:
        """Set (or change) a concurrency group's limits; workers read them at every slot they take."""
        self.store.define_group(
            group.name, connections=group.connections, requests=group.requests, period_ms=group.period_ms
        )

    def set_queue_limit(self, queue: str, limit: int | None) -> None:
        """At most `limit` running jobs of `queue` at once, across all workers (None: no limit)."""
        if not keys.NAME_PATTERN.match(queue):
            raise InvalidJob(f"invalid queue name {queue!r}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise InvalidJob(f"a queue limit must be a whole number of at least 1, got {limit!r}")
        self.store.set_queue_limit(queue, limit)

    def pause(self, queue: str) -> bool:
        return self._set_paused(queue, True)

    def resume(self, queue: str) -> bool:
        return self._set_paused(queue, False)

    def _set_paused(self, queue: str, paused: bool) -> bool:
        if not keys.NAME_PATTERN.match(queue):
            raise InvalidJob(f"invalid queue name {queue!r}")
        self.store.ensure_queue(queue)  # a queue paused before its first job
        return self.store.set_paused(queue, paused)

    @staticmethod
    def _outcome(job_id: str, outcome: str, ok: tuple[str, ...], operation: str) -> str:
        if outcome in ok:
            return outcome
        if outcome == "missing":
            raise JobNotFound(f"no job {job_id}")
        if outcome == "duplicate":
            raise JobStateConflict(job_id, "blocked by a live job with the same unique key", operation)
        raise JobStateConflict(job_id, outcome.removeprefix("is:"), operation)


# One encoder for every call: json.dumps with options builds a new JSONEncoder each time (about 1 µs an enqueue).
_PARAMS_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def encode_params(params: Any, task: Task | None) -> str:
    """Job parameters as stored: a JSON object with string keys, within the size limit, accepted by the
    task's signature when the task is registered here. Raises InvalidJob."""
    if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
        raise InvalidJob("params must be a JSON object with string keys")
    try:
        encoded = _PARAMS_ENCODER.encode(params)
    except (TypeError, ValueError) as exc:
        raise InvalidJob(f"params must be JSON (no NaN/Infinity, no objects): {exc}") from None
    if len(encoded) > MAX_PARAMS_BYTES:
        raise InvalidJob(f"params are {len(encoded)} bytes; the limit is {MAX_PARAMS_BYTES}")
    if task is not None:
        task.validate_params(params)
    return encoded


def _check_max_retries(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RETRIES:
        raise InvalidJob(f"max_retries must be an integer from 0 to {MAX_RETRIES}; got {value!r}")
    return value


def _timing(delay: float | None, run_at: datetime | None) -> tuple[Arg, Arg]:
    """(delay_ms, run_at_ms) script arguments, '' where unset. Redis adds its own clock to the delay."""
    if delay is not None and run_at is not None:
        raise InvalidJob("give delay or run_at, not both")
    if delay is not None:
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not math.isfinite(delay):
            raise InvalidJob(f"delay must be a number of seconds; got {delay!r}")
        if not 0 <= delay <= MAX_DELAY_SECONDS:
            raise InvalidJob(f"delay must be between 0 and {MAX_DELAY_SECONDS} seconds; got {delay}")
        return int(delay * 1000), ""
    if run_at is not None:
        if not isinstance(run_at, datetime) or run_at.tzinfo is None:
            raise InvalidJob("run_at must be a timezone-aware datetime")
        ms = int(run_at.timestamp() * 1000)
        if ms > (datetime.now().timestamp() + MAX_DELAY_SECONDS) * 1000:
            raise InvalidJob(f"run_at {TOO_FAR}")
        return "", ms  # a past run_at runs at once
    return "", ""
