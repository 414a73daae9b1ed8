"""Task registration: a function plus the options that govern its jobs (Jobbers' register_task fields)."""

import inspect
import json
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Union, get_args, get_origin, get_type_hints

from jobconsole.core.backoff import Backoff, retry_delay
from jobconsole.core.errors import InvalidJob, UnknownTask
from jobconsole.core.keys import NAME_PATTERN
from jobconsole.core.priority import parse_priority


class DeadLetterPolicy(StrEnum):
    SAVE = "save"  # exhausted jobs go to the dead-letter queue and stay until retention or an operator
    DISCARD = "discard"  # exhausted jobs end as "failed" and expire like completed ones


class OnShutdown(StrEnum):
    FINISH = "finish"  # let it run to the end (a second signal exits at once)
    REQUEUE = "requeue"  # interrupt it and put it back without using up an attempt
    FAIL = "fail"  # interrupt it and dead-letter it for a human to look at


@dataclass(frozen=True, kw_only=True)
class Task:
    func: Callable[..., Any]
    name: str
    version: int = 1
    queue: str = ""  # "" = a queue named after the task
    priority: int = 0
    timeout: float | None = None  # seconds; None = no limit
    max_retries: int = 3
    retry_delay: float = 5.0
    backoff_strategy: Backoff = Backoff.EXPONENTIAL
    max_retry_delay: float = 3600.0
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    max_heartbeat_interval: float | None = None  # the task must call context.heartbeat() this often
    visibility_timeout: float = 30.0  # lease length; heartbeats renew it
    dead_letter_policy: DeadLetterPolicy = DeadLetterPolicy.SAVE
    on_shutdown: OnShutdown = OnShutdown.FINISH
    group: str = ""  # concurrency group ("" none): its jobs run only holding one of the group's slots
    unique_until: str = "end"  # a job's unique key is held until it ends, or ("start") until it starts
    is_async: bool = field(init=False)
    context_param: str | None = field(init=False)
    _signature: "_Signature" = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not NAME_PATTERN.match(self.name):
            raise ValueError(f"invalid task name {self.name!r} (letters, digits, '_.-', at most 100)")
        object.__setattr__(self, "queue", self.queue or self.name)
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.func))
        object.__setattr__(self, "context_param", _context_param(self.func))
        object.__setattr__(self, "_signature", _Signature.of(self.func, self.context_param))
        if self.unique_until not in ("end", "start"):
            raise ValueError(f"task {self.name}: unique_until must be 'end' or 'start', not {self.unique_until!r}")
        if self.group and not NAME_PATTERN.match(self.group):
            raise ValueError(f"task {self.name}: invalid group name {self.group!r}")
        if self.max_retries < 0 or self.visibility_timeout <= 0 or self.retry_delay < 0:
            raise ValueError(f"task {self.name}: max_retries, retry_delay must be >= 0, visibility_timeout > 0")

    def next_retry_delay(self, attempt: int) -> float:
        return retry_delay(self.backoff_strategy, self.retry_delay, attempt, self.max_retry_delay)

    def retries(self, exc: BaseException) -> bool:
        return isinstance(exc, self.retry_on)

    @property
    def needs_params(self) -> bool:
        """Whether the signature has required parameters (so empty params are refused)."""
        return bool(self._signature.required)

    def validate_params(self, params: dict[str, Any]) -> None:
        """Check parameters against the function's signature and simple annotations (raises InvalidJob)."""
        sig = self._signature
        if not sig.accepts_any and not params.keys() <= sig.names:
            unknown = ", ".join(sorted(params.keys() - sig.names))
            raise InvalidJob(f"task {self.name}: unknown parameter(s) {unknown}")
        if not sig.required <= params.keys():
            missing = ", ".join(sorted(sig.required - params.keys()))
            raise InvalidJob(f"task {self.name}: missing parameter(s) {missing}")
        for key, value in params.items():
            hint = sig.hints.get(key)
            if hint is not None and not _matches(value, hint):
                raise InvalidJob(f"task {self.name}: parameter {key} should be {_type_name(hint)}")

    def options(self) -> dict[str, Any]:
        """The registered options as JSON-able data (the worker announces them; the console lists them)."""
        return {
            "name": self.name,
            "version": self.version,
            "queue": self.queue,
            "priority": self.priority,
            "timeout": self.timeout,
            "max_retries": self.max_retries,
            "retry_delay": self.retry_delay,
            "backoff_strategy": str(self.backoff_strategy),
            "max_retry_delay": self.max_retry_delay,
            "retry_on": [e.__name__ for e in self.retry_on],
            "max_heartbeat_interval": self.max_heartbeat_interval,
            "visibility_timeout": self.visibility_timeout,
            "dead_letter_policy": str(self.dead_letter_policy),
            "on_shutdown": str(self.on_shutdown),
            "is_async": self.is_async,
            "group": self.group,
            "unique_until": self.unique_until,
        }


@dataclass(frozen=True, slots=True)
class _Signature:
    """What enqueue checks parameters against, worked out once per task."""

    names: frozenset[str]
    required: frozenset[str]
    accepts_any: bool
    hints: dict[str, Any]

    @classmethod
    def of(cls, func: Callable[..., Any], context_param: str | None) -> "_Signature":
        params = {k: p for k, p in inspect.signature(func).parameters.items() if k != context_param}
        named = {k: p for k, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
        try:
            hints = {k: v for k, v in get_type_hints(func).items() if k in named}
        except Exception:  # noqa: BLE001 - unresolvable annotations: check names only
            hints = {}
        return cls(
            names=frozenset(named),
            required=frozenset(k for k, p in named.items() if p.default is p.empty),
            accepts_any=any(p.kind is p.VAR_KEYWORD for p in params.values()),
            hints=hints,
        )


def _context_param(func: Callable[..., Any]) -> str | None:
    """The parameter that receives the JobContext: annotated as JobContext, or named `context`."""
    for name, param in inspect.signature(func).parameters.items():
        ann = param.annotation
        if name == "context" or getattr(ann, "__name__", ann) == "JobContext":
            return name
    return None


_SIMPLE = {int, float, str, bool, list, dict, type(None)}


def _matches(value: Any, hint: Any) -> bool:
    """A cheap JSON-level type check; anything we do not understand passes."""
    if hint is Any:
        return True
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint in _SIMPLE:
        return isinstance(value, hint)
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_matches(value, h) for h in get_args(hint))
    if origin in (list, dict):
        return isinstance(value, origin)
    return True


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint)


class TaskRegistry:
    def __init__(self) -> None:
        self._tasks: dict[str, Task] = {}

    def register(self, func: Callable[..., Any], *, name: str | None = None, **options: Any) -> Task:
        if "priority" in options:
            options["priority"] = parse_priority(options["priority"])
        if "backoff_strategy" in options:
            options["backoff_strategy"] = Backoff.parse(options["backoff_strategy"])
        for key, enum in (
            ("on_shutdown", OnShutdown),
            ("dead_letter_policy", DeadLetterPolicy),
        ):
            if key in options:
                options[key] = enum(options[key])  # ValueError names the bad value
        if "retry_on" in options and not isinstance(options["retry_on"], tuple):
            options["retry_on"] = tuple(options["retry_on"])
        task = Task(func=func, name=name or f"{func.__module__}.{func.__qualname__}", **options)
        existing = self._tasks.get(task.name)
        if existing is not None and existing.func is not func:
            raise ValueError(f"task {task.name!r} is already registered to {existing.func!r}")
        self._tasks[task.name] = task
        return task

    def task(self, name: str | None = None, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator form of `register`; returns the function unchanged."""

        def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
            self.register(func, name=name, **options)
            return func

        return decorate

    def get(self, name: str) -> Task:
        try:
            return self._tasks[name]
        except KeyError:
            raise UnknownTask(f"unknown task {name!r}") from None

    def find(self, name: str) -> Task | None:
        return self._tasks.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tasks

    def all(self) -> list[Task]:
        return sorted(self._tasks.values(), key=lambda t: t.name)

    def options_json(self) -> dict[str, str]:
        return {t.name: json.dumps(t.options()) for t in self._tasks.values()}


default_registry = TaskRegistry()
task = default_registry.task
