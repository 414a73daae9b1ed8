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


def register_call_task(name: str, runner: CallRunner, **options: Any) -> EngineTask:
    """Register `runner` as the engine task `name`, once: a module imported again (or a Django Task made again
    by `.using()`) finds its task there already and keeps it."""
    existing = default_registry.find(name)
    if existing is not None:
        return existing
    return default_registry.register(runner, name=name, **options)
