"""Celery's canvas on Jobconsole (exported by jobconsole.celery): signatures, `chain`, `group`, `chord`, `map`,
`starmap`, `chunks`, `link` / `link_error`, with Celery's semantics:

- `task.s(*args, **kwargs)` is a partial call: in a chain, each step's result is prepended to the next step's
  arguments; `task.si(...)` is immutable and ignores it. `sig.clone(args)` prepends `args` too; `set(...)` keeps
  options (queue, countdown, priority, task_id...) for when it is sent.
- `a | b` is a chain; a group followed by a step is a chord: the step gets the list of the members' results.
- `.apply()` runs the whole canvas here, now (Celery's eager mode): the result of a chain is its last step's,
  with `.parent` the one before; a group's is a GroupResult whose `get()` is the list.
- `.apply_async()` / `.delay()` / calling a composite: a signature is a job; a group of plain signatures is its
  jobs enqueued together (all validated first); anything with dependencies (a chain, a chord, a link) is one
  workflow of the engine (jobconsole/core/workflows.py), created in one atomic call.
"""

import itertools
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

from jobconsole import transactional
from jobconsole.calls import call_params
from jobconsole.celery import (
    FAILURE,
    READY_STATES,
    REVOKED,
    SUCCESS,
    AsyncResult,
    CeleryTask,
    ChordError,
    EagerResult,
    Request,
    _tasks,
    celery_priority,
    job_id_of,
    shared_task,
)
from jobconsole.core import JobSpec

# Options of a signature, as apply_async takes them.
_SEND_OPTIONS = frozenset({"task_id", "countdown", "eta", "queue", "priority", "link", "link_error"})


class NotRegistered(KeyError):
    """A signature names a task this process has not registered (Celery's NotRegistered)."""


class Signature:
    """One task call, to be sent or composed later (Celery's Signature). Composites subclass it."""

    subtask_type: str | None = None

    def __init__(
        self,
        task: "str | CeleryTask[Any, Any] | None" = None,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        immutable: bool = False,
        subtask_type: str | None = None,
        **ex: Any,
    ) -> None:
        if isinstance(task, CeleryTask):
            self._task: CeleryTask[Any, Any] | None = task
            self.task = task.name
        else:
            self._task = None
            self.task = task or ""
        self.args = tuple(args or ())
        self.kwargs = dict(kwargs or {})
        self.options = {**(options or {}), **ex}
        self.immutable = immutable

    # What it calls

    @property
    def name(self) -> str:
        return self.task

    @property
    def type(self) -> CeleryTask[Any, Any]:
        """The registered task it calls."""
        if self._task is None:
            try:
                self._task = _tasks[self.task]
            except KeyError:
                raise NotRegistered(self.task) from None
        return self._task

    app = property(lambda self: self.type.app)

    @property
    def id(self) -> str | None:
        return self.options.get("task_id")

    # Building

    def _merge(
        self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> tuple[tuple[Any, ...], dict[str, Any], dict[str, Any]]:  # fmt: skip
        """Celery's partial application: new args before the stored ones, new kwargs and options over them; an
        immutable signature takes only options."""
        options = {**self.options, **(options or {})}
        if self.immutable:
            return self.args, dict(self.kwargs), options
        return tuple(args or ()) + self.args, {**self.kwargs, **(kwargs or {})}, options

    def clone(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> "Signature":  # fmt: skip
        args_, kwargs_, options_ = self._merge(args, kwargs, options)
        for key in ("link", "link_error"):
            if options_.get(key) is not None:
                options_[key] = _signatures(key, options_[key])
        clone = Signature(self._task or self.task, args_, kwargs_, options_, immutable=self.immutable)
        return clone

    def set(self, immutable: bool | None = None, **options: Any) -> "Signature":
        """Set send options (queue, countdown, eta, priority, task_id...): returns the signature itself."""
        if immutable is not None:
            self.immutable = immutable
        self.options.update(options)
        return self

    def set_immutable(self, immutable: bool) -> None:
        self.immutable = immutable

    def link(self, callback: "Signature") -> "Signature":
        """Run `callback` with this call's result after it succeeds."""
        self.options.setdefault("link", []).append(callback)
        return callback

    def link_error(self, errback: "Signature") -> "Signature":
        """Run `errback` if this call fails."""
        self.options.setdefault("link_error", []).append(errback)
        return errback

    def on_error(self, errback: "Signature") -> "Signature":
        self.link_error(errback)
        return self

    def freeze(self, _id: str | None = None) -> AsyncResult[Any]:
        """Give it its task id now (the result it will have once sent)."""
        if _id is not None or "task_id" not in self.options:
            self.options["task_id"] = _id or new_id()
        return AsyncResult(self.options["task_id"])

    def __or__(self, other: "Signature") -> "Signature":
        if isinstance(other, chain):
            return chain(self, *other.tasks)
        if isinstance(other, Signature):
            return chain(self, other)
        return NotImplemented

    # Running

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function here with the signature's arguments (Celery's Signature.__call__)."""
        args_, kwargs_, _ = self._merge(args, kwargs)
        return self.type(*args_, **kwargs_)

    def delay(self, *args: Any, **kwargs: Any) -> AsyncResult[Any]:
        return self.apply_async(args, kwargs)

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    **options: Any) -> AsyncResult[Any]:  # fmt: skip
        """Send it: one job, or a workflow when it has links (link / link_error)."""
        args_, kwargs_, options_ = self._merge(args, kwargs, options)
        for key in ("link", "link_error"):
            if options_.get(key) is not None:
                options_[key] = _signatures(key, options_[key])
        if options_.get("link") or options_.get("link_error"):
            return _send(Signature(self._task or self.task, args_, kwargs_, options_, immutable=True))
        options_.pop("link", None), options_.pop("link_error", None)
        return self.type.apply_async(args_, kwargs_, **options_)

    def apply(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> EagerResult[Any]:  # fmt: skip
        """Run it here, now (and its links): an EagerResult."""
        return cast(EagerResult[Any], _eager(self, (), args, kwargs, options))

    # Reading

    def as_dict(self) -> dict[str, Any]:
        """Celery's dict form of a signature ({"task", "args", "kwargs", "options", "subtask_type", "immutable"})."""
        options = {k: ([s.as_dict() for s in v] if k in ("link", "link_error") else v) for k, v in self.options.items()}
        return {"task": self.task, "args": list(self.args), "kwargs": self.kwargs, "options": options,
                "subtask_type": self.subtask_type, "immutable": self.immutable}  # fmt: skip

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Signature) and other.as_dict() == self.as_dict()

    __hash__ = None  # type: ignore[assignment]  # mutable, as Celery's (a dict)

    def __repr__(self) -> str:
        arguments = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.task}({', '.join(arguments)}){'' if not self.immutable else '!'}"


def _signatures(option: str, value: Any) -> list[Signature]:
    """link= / link_error=: a signature or a list of them."""
    items = value if isinstance(value, list | tuple) else [value]
    if not all(isinstance(i, Signature) for i in items):
        raise TypeError(f"{option} takes a signature or a list of signatures (task.s(...)); got {value!r}")
    return list(items)


def new_id() -> str:
    from jobconsole.core.ids import new_job_id

    return new_job_id()


def _tasks_of(tasks: tuple[Any, ...]) -> list[Signature]:
    """Celery's `group(a, b)` or `group([a, b])` / `group(a generator)`."""
    if len(tasks) == 1 and not isinstance(tasks[0], Signature | Mapping):
        tasks = tuple(tasks[0])
    return [cast(Signature, maybe_signature(t)) for t in tasks]


class chain(Signature):  # noqa: N801 - Celery's name
    """Steps run one after the other, each given the previous one's result (first argument) unless immutable.
    Calling it (`chain(...)()`) sends it; its result is the last step's, whose `.parent` is the step before."""

    subtask_type = "chain"

    def __init__(self, *tasks: Any, **options: Any) -> None:
        super().__init__("celery.chain", options=options)
        steps: list[Signature] = []
        for task in _tasks_of(tasks):
            steps.extend(task.tasks if isinstance(task, chain) else [task])  # flattened, as `|` does in Celery
        self.tasks: list[Signature] = steps

    def __or__(self, other: Signature) -> Signature:
        if isinstance(other, chain):
            return chain(*self.tasks, *other.tasks, **self.options)
        if isinstance(other, Signature):
            return chain(*self.tasks, other, **self.options)
        return NotImplemented

    def __call__(self, *args: Any, **kwargs: Any) -> AsyncResult[Any]:
        return self.apply_async(args, kwargs)

    def clone(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> "chain":  # fmt: skip
        tasks = [t.clone() for t in self.tasks]
        if tasks and (args or kwargs):
            tasks[0] = tasks[0].clone(args, kwargs)
        return chain(*tasks, **{**self.options, **options})

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    **options: Any) -> AsyncResult[Any]:  # fmt: skip
        if not self.tasks:
            raise ValueError("an empty chain has nothing to send")
        return _send(self.clone(args, kwargs, **options))

    def apply(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> EagerResult[Any]:  # fmt: skip
        return cast(EagerResult[Any], _eager(self.clone(**options), (), args, kwargs, {}))

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "kwargs": {"tasks": [t.as_dict() for t in self.tasks]}}

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.tasks)) or "chain()"


class group(Signature):  # noqa: N801 - Celery's name
    """Members run in parallel; its result is a GroupResult, whose `get()` is the list of the members' results.
    A group followed by a step (`group(...) | step`) is a chord."""

    subtask_type = "group"

    def __init__(self, *tasks: Any, **options: Any) -> None:
        super().__init__("celery.group", options=options)
        self.tasks = _tasks_of(tasks)

    def __or__(self, other: Signature) -> Signature:
        if isinstance(other, chain):
            return chain(chord(self, other.tasks[0]), *other.tasks[1:])
        if isinstance(other, Signature) and not isinstance(other, group):
            return chord(self, other)
        if isinstance(other, Signature):
            return chain(self, other)
        return NotImplemented

    def __call__(self, *args: Any, **kwargs: Any) -> "GroupResult":
        return self.apply_async(args, kwargs)

    def __iter__(self) -> Iterator[Signature]:
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    def clone(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> "group":  # fmt: skip
        return group([t.clone(args, kwargs) for t in self.tasks], **{**self.options, **options})

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    **options: Any) -> "GroupResult":  # fmt: skip
        cloned = cast(group, push_down(self.clone(args, kwargs, **options)))
        if not cloned.options.get("link") and not cloned.options.get("link_error") and all(
            not isinstance(t, chain | group | chord | chunks) and not t.options.get("link")
            and not t.options.get("link_error") for t in cloned.tasks
        ):  # fmt: skip
            return _send_plain_group(cloned)
        return cast(GroupResult, _send(cloned))

    def apply(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,  # type: ignore[override]
              **options: Any) -> "GroupResult":  # fmt: skip
        return cast(GroupResult, _eager(self.clone(**options), (), args, kwargs, {}))

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "kwargs": {"tasks": [t.as_dict() for t in self.tasks]}}

    def __repr__(self) -> str:
        return f"group([{', '.join(map(repr, self.tasks))}])"


class chord(Signature):  # noqa: N801 - Celery's name
    """A group (the header) and a callback (the body) given the list of the header's results once all have
    succeeded; `chord(header)(body)` sends it. Its result is the body's, whose `.parent` is the header's
    GroupResult. A failed member: the body does not run and its result is a ChordError."""

    subtask_type = "chord"

    def __init__(self, header: Any, body: Signature | None = None, **options: Any) -> None:
        super().__init__("celery.chord", options=options)
        self.tasks = header if isinstance(header, group) else group(header)
        self.body = body

    header = property(lambda self: self.tasks)

    def __call__(self, body: Signature | None = None, **options: Any) -> AsyncResult[Any]:
        return self.apply_async((), body=body, **options)

    def __or__(self, other: Signature) -> Signature:
        if isinstance(other, Signature):
            return chain(self, other)
        return NotImplemented

    def clone(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> "chord":  # fmt: skip
        body = options.pop("body", None) or self.body
        return chord(self.tasks.clone(args, kwargs), body.clone() if body is not None else None,
                     **{**self.options, **options})  # fmt: skip

    def _with_body(self, args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None, body: Signature | None,
                   options: dict[str, Any]) -> "chord":  # fmt: skip
        cloned = self.clone(args, kwargs, body=body, **options)
        if cloned.body is None:
            raise TypeError("a chord needs a body: chord(header)(body) or chord(header, body)")
        return cloned

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    body: Signature | None = None, **options: Any) -> AsyncResult[Any]:  # fmt: skip
        return _send(self._with_body(args, kwargs, body, options))

    def apply(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              body: Signature | None = None, **options: Any) -> EagerResult[Any]:  # fmt: skip
        return cast(EagerResult[Any], _eager(self._with_body(args, kwargs, body, options), (), None, None, {}))

    def as_dict(self) -> dict[str, Any]:
        body = self.body.as_dict() if self.body is not None else None
        return {**super().as_dict(), "kwargs": {"header": self.tasks.as_dict()["kwargs"]["tasks"], "body": body}}

    def __repr__(self) -> str:
        return f"chord({self.tasks!r}, {self.body!r})"


# Built-in tasks: one job calling a task once per item (Celery's celery.map / celery.starmap).


@shared_task(name="celery.map")
def _map(task: str, it: list[Any]) -> list[Any]:
    target = _tasks[task]
    return [target(item) for item in it]


@shared_task(name="celery.starmap")
def _starmap(task: str, it: list[list[Any]]) -> list[Any]:
    target = _tasks[task]
    return [target(*item) for item in it]


@shared_task(name="celery.errback")
def _errback(watched: list[str], errback: dict[str, Any]) -> Any:
    """link_error's step (celery_workflows.py), run when one of the `watched` jobs did not complete: calls
    `errback` here with the first that failed (else the first cancelled), as Celery calls it inline in the
    worker; nothing if none did."""
    results: list[AsyncResult[Any]] = [AsyncResult(i) for i in watched]
    states = [r.state for r in results]
    failed = next((r for r, s in zip(results, states, strict=True) if s == FAILURE), None) or next(
        (r for r, s in zip(results, states, strict=True) if s == REVOKED), None
    )
    if failed is None:
        return None
    sig = maybe_signature(errback)
    assert sig is not None
    return _eager(sig, _errback_args(sig, failed), None, None, {}).get()


class xmap(Signature):  # noqa: N801 - Celery's name
    """`task.map(items)`: one job calling `task(item)` for each item; its result is the list."""

    builtin = "celery.map"

    def __init__(self, task: CeleryTask[Any, Any], it: Iterable[Any], **options: Any) -> None:
        # The job goes to the task's own queue, where a worker that knows the task listens.
        super().__init__(self.builtin, (), {"task": task.name, "it": [list(i) if isinstance(i, tuple) else i
                                                                     for i in it]},
                         {"queue": task.queue, **options}, immutable=True)  # fmt: skip


class xstarmap(xmap):  # noqa: N801 - Celery's name
    """`task.starmap(items)`: one job calling `task(*item)` for each item; its result is the list."""

    builtin = "celery.starmap"


class chunks(Signature):  # noqa: N801 - Celery's name
    """`task.chunks(items, n)`: the items in starmaps of `n`, sent as a group (`.group()`)."""

    subtask_type = "chunks"

    def __init__(self, task: CeleryTask[Any, Any], it: Iterable[Sequence[Any]], n: int, **options: Any) -> None:
        if n < 1:
            raise ValueError("chunks need n >= 1")
        super().__init__("celery.chunks", options=options)
        self._target, self.it, self.n = task, [list(i) for i in it], n

    def clone(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> "chunks":  # fmt: skip
        return chunks(self._target, self.it, self.n, **{**self.options, **options})

    def group(self) -> group:
        parts = [self.it[i : i + self.n] for i in range(0, len(self.it), self.n)]
        return group([xstarmap(self._target, part, **self.options) for part in parts])

    def __call__(self, *args: Any, **kwargs: Any) -> "GroupResult":
        return self.apply_async()

    def apply_async(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
                    **options: Any) -> "GroupResult":  # fmt: skip
        return self.group().apply_async(**options)

    def apply(self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,  # type: ignore[override]
              **options: Any) -> "GroupResult":  # fmt: skip
        return self.group().apply(**options)


def signature(varies: Any, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None,
              **options: Any) -> Signature:  # fmt: skip
    """Celery's `signature("proj.tasks.add", args=(2, 2), countdown=10)`, or of a signature (a copy) or its
    dict form."""
    if isinstance(varies, Signature):
        return varies.clone()
    if isinstance(varies, Mapping):
        return _from_dict(varies)
    return Signature(varies, args, kwargs, options)


def maybe_signature(d: Any) -> Signature | None:
    if d is None or isinstance(d, Signature):
        return d
    if isinstance(d, Mapping):
        return _from_dict(d)
    raise TypeError(f"not a signature: {d!r}")


def _from_dict(d: Mapping[str, Any]) -> Signature:
    kind, kwargs, options = d.get("subtask_type"), d.get("kwargs") or {}, dict(d.get("options") or {})
    for key in ("link", "link_error"):
        if key in options:
            options[key] = [_from_dict(s) for s in options[key]]
    if kind == "chain":
        return chain(*kwargs["tasks"], **options)
    if kind == "group":
        return group(kwargs["tasks"], **options)
    if kind == "chord":
        return chord(kwargs["header"], maybe_signature(kwargs.get("body")), **options)
    return Signature(d["task"], d.get("args"), kwargs, options, immutable=bool(d.get("immutable")))


class GroupResult(AsyncResult[list[Any]]):
    """The results of a group's members (Celery's GroupResult): `get()` is the list of their values."""

    def __init__(self, id: str | None = None, results: list[AsyncResult[Any]] | None = None,
                 parent: AsyncResult[Any] | None = None, **kwargs: Any) -> None:  # fmt: skip
        super().__init__(id or str(uuid.uuid4()), parent=parent)
        self.results = list(results or ())
        self.children = self.results

    @property
    def state(self) -> str:
        states = [r.state for r in self.results]
        if any(s == FAILURE for s in states):
            return FAILURE
        return SUCCESS if all(s == SUCCESS for s in states) else next((s for s in states if s not in READY_STATES),
                                                                      states[0] if states else SUCCESS)  # fmt: skip

    @property
    def result(self) -> list[Any]:
        return [r.result for r in self.results]

    @property
    def traceback(self) -> str | None:
        return next((t for t in (r.traceback for r in self.results) if t), None)

    def ready(self) -> bool:
        return all(r.ready() for r in self.results)

    def successful(self) -> bool:
        return all(r.successful() for r in self.results)

    def failed(self) -> bool:
        return any(r.failed() for r in self.results)

    def waiting(self) -> bool:
        return not self.ready()

    def completed_count(self) -> int:
        return sum(1 for r in self.results if r.successful())

    def get(self, timeout: float | None = None, propagate: bool = True, interval: float = 0.5,
            **ignored: Any) -> list[Any]:  # fmt: skip
        """Each member's value in order (waiting for all); the first failure raises (propagate)."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        values = []
        for result in self.results:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            values.append(result.get(timeout=left, propagate=propagate, interval=interval))
        return values

    join = get

    def revoke(self, connection: Any = None, terminate: bool = False, signal: str | None = None,
               **ignored: Any) -> None:  # fmt: skip
        for result in self.results:
            result.revoke()

    def __iter__(self) -> Iterator[AsyncResult[Any]]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int) -> AsyncResult[Any]:
        return self.results[index]

    def __repr__(self) -> str:
        return f"<GroupResult: {self.id} [{', '.join(r.id for r in self.results)}]>"


class EagerGroupResult(GroupResult):
    """A group run here: every member has run."""

    def ready(self) -> bool:
        return True


# --- Running here (apply) ---------------------------------------------------------------------------------

_NO_VALUE: tuple[Any, ...] = ()


def _eager(sig: Signature, prepend: tuple[Any, ...], args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None,
           options: Mapping[str, Any]) -> AsyncResult[Any]:  # fmt: skip
    """Run `sig` here with `prepend` (the previous step's result, or nothing) before `args`."""
    args = tuple(prepend) + tuple(args or ())
    if isinstance(sig, chain | group | chord) and (sig.options.get("link") or sig.options.get("link_error")):
        raise TypeError(f"{sig.subtask_type}: run here (apply(), task_always_eager), links of a composite are not "
                        "supported; link its steps")  # fmt: skip
    if isinstance(sig, chain):
        last: AsyncResult[Any] | None = None
        step_args: tuple[Any, ...] = args
        step_kwargs = kwargs
        for step in sig.tasks:
            result = _eager(step, (last.get(),) if last is not None else (), step_args, step_kwargs, options)
            result.parent, last, step_args, step_kwargs = last, result, (), None
        assert last is not None, "an empty chain"
        return last
    if isinstance(sig, group):
        results = [_eager(t, (), args, kwargs, options) for t in sig.tasks]
        return EagerGroupResult(sig.options.get("group_id"), results)
    if isinstance(sig, chord):
        assert sig.body is not None
        header = cast(GroupResult, _eager(sig.tasks, (), args, kwargs, options))
        failed = next((r for r in header.results if r.failed()), None)
        if failed is not None:
            error = ChordError(f"dependency {failed.id} raised {failed.result!r}")
            return EagerResult(new_id(), error, FAILURE, parent=header)
        body = _eager(sig.body, (header.get(),), None, None, options)
        body.parent = header
        return body
    if isinstance(sig, chunks):
        return _eager(sig.group(), (), None, None, options)
    sig_args, sig_kwargs, sig_options = sig._merge(args, kwargs, options)
    links, errbacks = (_signatures(key, sig_options.pop(key, None) or []) for key in ("link", "link_error"))
    result = sig.type.apply(sig_args, sig_kwargs, task_id=sig_options.get("task_id"),
                            throw=sig_options.get("throw"))  # fmt: skip
    if result.successful():
        for callback in links:
            result.children.append(_eager(callback, (result.get(),), None, None, {}))
    else:
        for errback in errbacks:
            result.children.append(_eager(errback, _errback_args(errback, result), None, None, {}))
    return result


def _errback_args(errback: Signature, failed: AsyncResult[Any]) -> tuple[Any, ...]:
    """Celery's errback arguments: (request, exc, traceback) when the task takes three, else the task id."""
    try:
        errback.type._check_arguments([None, None, None, *errback.args], dict(errback.kwargs))
        positional = True
    except TypeError:
        positional = False
    if positional:
        return (Request(id=failed.id, retries=0, is_eager=True), failed.result, failed.traceback)
    return (failed.id,)


# --- Sending (apply_async) --------------------------------------------------------------------------------


def _send_plain_group(g: group) -> GroupResult:
    """A group without dependencies: its jobs, all validated before any is sent (Client.enqueue_many)."""
    specs = []
    for member in g.tasks:
        task = member.type
        args, kwargs, options = list(member.args), dict(member.kwargs), dict(member.options)
        task._check_arguments(args, kwargs)
        unsupported = sorted(k for k in options if k not in _SEND_OPTIONS)
        if unsupported:
            raise TypeError(f"{task.name}: options not supported in a group by Jobconsole: {', '.join(unsupported)}")
        queue = options.get("queue") or task.app._dynamic_route(task.name, args, kwargs) or task.queue
        priority = options.get("priority")
        specs.append(JobSpec(
            task=task.name, params=call_params(args, kwargs),
            id=job_id_of(options["task_id"]) if options.get("task_id") else None, queue=queue,
            priority=celery_priority(priority if priority is not None else task.priority),
            delay=options.get("countdown"), run_at=task.app._aware(options.get("eta")),
        ))  # fmt: skip
    if g.tasks and g.tasks[0].type.app.conf.task_always_eager:
        return cast(GroupResult, _eager(g, (), None, None, {}))
    ids = transactional.enqueue_many(specs)
    given = [m.options.get("task_id") for m in g.tasks]
    return GroupResult(g.options.get("group_id"), [AsyncResult(t or i) for t, i in zip(given, ids, strict=True)])


# Send options of a composite: given to its parts by push_down.
_COMPOSITE_OPTIONS = frozenset({"queue", "priority", "countdown", "eta", "task_id", "group_id", "link", "link_error"})


def push_down(sig: Signature) -> Signature:
    """A copy of a composite whose own send options are given to its parts: `queue` and `priority` to every step
    (a step's own win), `countdown` and `eta` to the steps it starts with, `task_id` to the step whose result is
    the composite's (a chain's last, a chord's body; a group's is its `group_id`). Links stay on the composite.
    TypeError for any other option, rather than dropping it."""
    if isinstance(sig, chunks):
        return push_down(sig.group())
    if not isinstance(sig, chain | group | chord):
        return sig
    opts = {k: v for k, v in sig.options.items() if v is not None}
    unknown = sorted(set(opts) - _COMPOSITE_OPTIONS)
    if unknown:
        raise TypeError(f"{sig.subtask_type} options not supported by Jobconsole: {', '.join(unknown)}")
    every: dict[str, Any] = {k: opts[k] for k in ("queue", "priority") if k in opts}
    start: dict[str, Any] = {k: opts[k] for k in ("countdown", "eta") if k in opts}
    result_id: dict[str, Any] = {"task_id": opts["task_id"]} if "task_id" in opts else {}
    keep: dict[str, Any] = {k: opts[k] for k in ("link", "link_error") if k in opts}
    errbacks = _signatures("link_error", opts.get("link_error") or [])

    def give(part: Signature, extra: dict[str, Any], with_errbacks: bool = False) -> Signature:
        if not extra and not (with_errbacks and errbacks):
            return push_down(part)  # nothing to give: no copy (nothing downstream changes a signature)
        part = part.clone()
        for key, value in extra.items():
            part.options.setdefault(key, value)
        if with_errbacks and errbacks:  # Celery links a group's errback to each member, a chord's to its body
            part.options["link_error"] = [*_signatures("link_error", part.options.get("link_error") or []),
                                          *errbacks]  # fmt: skip
        return push_down(part)

    if isinstance(sig, chain):
        last = len(sig.tasks) - 1
        return chain(*[give(t, {**every, **(start if i == 0 else {}), **(result_id if i == last else {})})
                       for i, t in enumerate(sig.tasks)], **keep)  # fmt: skip
    links = {"link": opts["link"]} if "link" in opts else {}
    if isinstance(sig, group):
        group_id = opts.get("group_id") or opts.get("task_id")
        return group([give(t, {**every, **start}, with_errbacks=True) for t in sig.tasks], **links,
                     **({"group_id": group_id} if group_id else {}))  # fmt: skip
    assert sig.body is not None
    return chord(give(sig.tasks, {**every, **start}), give(sig.body, {**every, **result_id}, with_errbacks=True),
                 **links)  # fmt: skip


def _send(sig: Signature) -> AsyncResult[Any]:
    """A canvas with dependencies as one workflow of the engine."""
    first = next(_leaves(sig), None)
    if first is not None and first.type.app.conf.task_always_eager:
        return _eager(sig, (), None, None, {})
    from jobconsole import celery_workflows

    return celery_workflows.send(sig)


def _leaves(sig: Signature) -> Iterator[Signature]:
    """The task signatures of a canvas, in order."""
    if isinstance(sig, chain | group):
        yield from itertools.chain.from_iterable(_leaves(t) for t in sig.tasks)
    elif isinstance(sig, chord):
        yield from _leaves(sig.tasks)
        if sig.body is not None:
            yield from _leaves(sig.body)
    elif isinstance(sig, chunks):
        yield from _leaves(sig.group())
    else:
        yield sig


__all__ = [
    "ChordError", "GroupResult", "NotRegistered", "Signature", "chain", "chord", "chunks",
    "group", "maybe_signature", "signature", "xmap", "xstarmap",
]  # fmt: skip
