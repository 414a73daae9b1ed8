"""Functions called with positional and keyword arguments (Django's and Celery's convention) as engine tasks.

The engine passes a job's params to its task as keyword arguments. A function registered here is wrapped by a
task that takes exactly two: `args` (a JSON list) and `kwargs` (a JSON object), so its job's params are
`{"args": [...], "kwargs": {...}}` and the function is called as `func(*args, **kwargs)`. The console shows
them as they are; an operator's edit-and-retry edits them like any job's params.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jobconsole.core import JobContext, default_registry
from jobconsole.core.errors import InvalidJob
from jobconsole.core.tasks import Task as EngineTask

# A wrapper's parameters; the engine hands `context` (the job's JobContext) to a parameter of that name.
type CallRunner = Callable[[JobContext, list[Any], dict[str, Any]], Any]


def call_params(args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The stored params of one call. Raises InvalidJob when a keyword is not a string."""
    kwargs = dict(kwargs or {})
    if not all(isinstance(key, str) for key in kwargs):
        raise InvalidJob("keyword arguments must have string names")
    return {"args": list(args or ()), "kwargs": kwargs}


# Engine tasks registered here: only these may be found registered again (another task of the name is an error).
_call_tasks: set[str] = set()


def register_call_task(name: str, runner: CallRunner, **options: Any) -> EngineTask:
    """Register `runner` as the engine task `name`, once: a module imported again (or a Django Task made again
    by `.using()`) finds its task there already and keeps it. ValueError when an engine task of its own
    (`@jobconsole.core.task`) has the name."""
    existing = default_registry.find(name)
    if existing is not None:
        if name not in _call_tasks:
            raise ValueError(f"task {name!r} is already registered to {existing.func!r}")
        return existing
    registered = default_registry.register(runner, name=name, **options)
    _call_tasks.add(name)
    return registered
