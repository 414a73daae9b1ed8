"""A Celery canvas with dependencies (a chain, a chord, a link / link_error) sent as one workflow of the engine
(jobconsole/core/workflows.py): one atomic call creates every job, so a chain of chords nests into one DAG, and
the engine releases each dependent once, after its parents ended.

How Celery's semantics map onto steps:
- a task signature is a step; a step after one step (a chain) gets that step's result prepended to its args
  (`pass_results="*args"`); a step after a group (a chord's body, or a chain's step after a group) gets the list
  of the members' results (`"*args-list"`); an immutable signature (`si`) waits but gets nothing;
- a failed step cancels what waits for it (the engine's "cancel" policy): a chain stops, a chord's body does not
  run. `AsyncResult.get()` of a step cancelled so raises the failure that cancelled it (a chord's body: ChordError),
  as Celery's `get()` raises a parent's error;
- `link=` is a dependent step given the result; `link_error=` is a step of the built-in task `celery.errback` that
  the engine runs at the first of its watched steps that does not complete (`when="first_failure"`; cancelled
  when all complete): a task's own step, every step of a chain; a group's members and a chord's body each get
  the errback (push_down). It calls the errback in its job with (request, exc, traceback) when it takes three
  arguments, else with the failed task's id (Celery's two forms; Celery calls it inline in the worker).
"""

import dataclasses
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from jobconsole import transactional
from jobconsole.calls import call_params
from jobconsole.canvas import (
    GroupResult,
    Signature,
    _errback,
    _signatures,
    chain,
    chord,
    chunks,
    group,
    push_down,
)
from jobconsole.celery import AsyncResult, celery_priority, job_id_of
from jobconsole.core import JobSpec
from jobconsole.core.ids import new_job_id
from jobconsole.core.workflows import ARGS, ARGS_LIST, FIRST_FAILURE, RUN, Step, plan
from jobconsole.engine import get_client

_SEND_OPTIONS = frozenset({"task_id", "countdown", "eta", "queue", "priority", "link", "link_error"})


@dataclass(frozen=True, slots=True)
class _Out:
    """What a part of the canvas hands to the next: one step's result, or a list of steps' results."""

    kind: str  # "one" | "list"
    steps: tuple[str, ...]


class _Builder:
    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.side: set[str] = set()  # steps of links and errbacks: not watched by an enclosing link_error
        self.index: dict[str, int] = {}  # step name -> its place in steps
        # Results whose job id the engine makes (set after the call): ids given by the caller are checked ULIDs
        # each, which costs more than the rest of a step's planning.
        self.unnamed: dict[str, AsyncResult[Any]] = {}
        self.checked: set[tuple[str, int, frozenset[str]]] = set()  # call shapes whose arguments were checked
        self.routed: dict[str, tuple[str, bool]] = {}  # task -> (its queue, whether a router function may say)

    def _name(self, task: str) -> str:
        return f"{len(self.steps) + 1}.{task}"[:100]

    def _append(self, step: Step, result: AsyncResult[Any]) -> None:
        self.index[step.name] = len(self.steps)
        self.steps.append(step)
        if step.spec.id is None:
            self.unnamed[step.name] = result

    def job_id(self, name: str) -> str:
        """The job id of a step, made now if the engine was to make it."""
        at = self.index[name]
        step = self.steps[at]
        if step.spec.id is None:
            step = dataclasses.replace(step, spec=dataclasses.replace(step.spec, id=new_job_id()))
            self.steps[at] = step
            self.unnamed.pop(name).id = str(step.spec.id)
        return str(step.spec.id)

    def add(self, sig: Signature, incoming: _Out | None) -> tuple[_Out, AsyncResult[Any]]:
        """Steps for `sig`, which waits for `incoming`; what it hands on, and its result."""
        if isinstance(sig, chunks):
            return self.add(sig.group(), incoming)
        if isinstance(sig, chain):
            first_step, out, last = len(self.steps), incoming, None
            for step in sig.tasks:
                out_, result = self.add(step, out)
                _attach(result, last)
                out, last = out_, result
            if out is None or last is None:
                raise ValueError("an empty chain has nothing to send")
            watched = tuple(s.name for s in self.steps[first_step:] if s.name not in self.side)
            self._links(sig, out, last, watched)
            return out, last
        if isinstance(sig, group):
            outs, results = [], []
            for member in sig.tasks:
                member_out, result = self.add(member, incoming)
                outs.append(member_out)
                results.append(result)
            grouped = GroupResult(sig.options.get("group_id"), results)
            out = _Out("list", tuple(s for o in outs for s in o.steps))
            self._links(sig, out, grouped, out.steps)  # push_down gave each member the group's link_error
            return out, grouped
        if isinstance(sig, chord):
            if sig.body is None:
                raise TypeError("a chord needs a body: chord(header)(body) or chord(header, body)")
            header_out, header = self.add(sig.tasks, incoming)
            out, body = self.add(sig.body, header_out)
            _attach(body, header)
            self._links(sig, out, body, out.steps)  # push_down gave the body the chord's link_error
            return out, body
        return self._task(sig, incoming)

    def _task(self, sig: Signature, incoming: _Out | None) -> tuple[_Out, AsyncResult[Any]]:
        task = sig.type
        args, kwargs, options = list(sig.args), sig.kwargs, sig.options
        if not options.keys() <= _SEND_OPTIONS:
            unsupported = sorted(k for k in options if k not in _SEND_OPTIONS and options[k] is not None)
            if unsupported:
                raise TypeError(f"{task.name}: options not supported by Jobconsole: {', '.join(unsupported)}")
        after: tuple[str, ...] = ()
        pass_results = None
        if incoming is not None:
            after = incoming.steps
            if not sig.immutable:
                if incoming.kind == "list" and not after:
                    args = [[], *args]  # after an empty group: its results are an empty list, now
                else:
                    pass_results = ARGS if incoming.kind == "one" else ARGS_LIST
        # Checked as the call will be made (the parents' result(s) first), once per shape of call and task.
        shape = (task.name, len(args) + (pass_results is not None), frozenset(kwargs))
        if shape not in self.checked:
            task._check_arguments([None, *args] if pass_results else args, kwargs)
            self.checked.add(shape)
        queue = options.get("queue")
        if not queue:
            routed = self.routed.get(task.name)
            if routed is None:  # the task's queue, unless a router function of the app decides per call
                routed = self.routed[task.name] = (task.queue, any(callable(r) for r in task.app._routes()))
            queue = (routed[1] and task.app._dynamic_route(task.name, args, kwargs)) or routed[0]
        priority = options.get("priority")
        eta = options.get("eta")
        spec = JobSpec(
            task=task.name, params=call_params(args, kwargs),
            id=job_id_of(options["task_id"]) if options.get("task_id") else None, queue=queue,
            priority=celery_priority(priority if priority is not None else task.priority),
            delay=options.get("countdown"), run_at=task.app._aware(eta) if eta is not None else None,
        )  # fmt: skip
        name = self._name(task.name)
        result: AsyncResult[Any] = AsyncResult(options.get("task_id") or "")
        self._append(Step(name, spec, after=after, pass_results=pass_results), result)
        out = _Out("one", (name,))
        if options.get("link") or options.get("link_error"):
            self._links(sig, out, result, out.steps)
        return out, result

    def _links(self, sig: Signature, out: _Out, result: AsyncResult[Any], watched: tuple[str, ...]) -> None:
        """link: steps given the result (`out`). link_error: one celery.errback step per errback, run at the first
        of the `watched` steps that does not complete (the engine's first_failure; cancelled if all complete)."""
        for callback in _signatures("link", sig.options.get("link") or []):
            first_step = len(self.steps)
            _, child = self.add(callback, out)
            self.side.update(s.name for s in self.steps[first_step:])
            result.children.append(child)
        for errback in _signatures("link_error", sig.options.get("link_error") or []):
            spec = JobSpec(task=_errback.name, params=call_params([[self.job_id(w) for w in watched],
                                                                  errback.as_dict()], {}),
                           queue=_queue_of_errback(errback))  # fmt: skip
            name = self._name(_errback.name)
            errback_result: AsyncResult[Any] = AsyncResult("")
            self._append(Step(name, spec, after=dict.fromkeys(watched, RUN), when=FIRST_FAILURE), errback_result)
            self.side.add(name)
            result.children.append(errback_result)


def _queue_of_errback(errback: Signature) -> str:
    if isinstance(errback, chain | group | chord | chunks):
        raise TypeError("link_error takes task signatures (task.s(...)), not composites")
    return str(errback.options.get("queue") or errback.type.queue)


def _attach(result: AsyncResult[Any], parent: AsyncResult[Any] | None) -> None:
    """`parent` as the parent of the earliest result `result` leads back to (a chord's header, say)."""
    seen = 0
    while result.parent is not None and seen < 10_000:
        result, seen = result.parent, seen + 1
    result.parent = parent


def send(sig: Signature) -> AsyncResult[Any]:
    """Create the workflow of `sig` (one atomic call) and return its result: a chain's last step's, a chord's
    body's, a group's GroupResult. Inside a database transaction, when it commits (IN_TRANSACTION "on_commit",
    and "outbox", which has no workflows: both are checked now, sent after the commit)."""
    builder = _Builder()
    _, result = builder.add(push_down(sig), None)
    steps = builder.steps
    name = _workflow_name(sig)
    client = get_client()
    if transactional.configured_mode() != "now" and transaction.get_connection().in_atomic_block:
        for step in list(builder.unnamed):
            builder.job_id(step)  # the results' ids are known before the commit
        steps = builder.steps
        plan(client, steps)  # refused now, inside the caller's transaction
        transaction.on_commit(lambda: get_client().enqueue_workflow(steps, name=name), robust=True)
    else:
        created = client.enqueue_workflow(steps, name=name)
        for step, unnamed in builder.unnamed.items():
            unnamed.id = created.job_ids_by_step[step]
    return result


def _workflow_name(sig: Signature) -> str:
    text = "".join(c if c.isprintable() else " " for c in repr(sig))
    return text if len(text) <= 200 else text[:199] + "…"


__all__ = ["send"]
