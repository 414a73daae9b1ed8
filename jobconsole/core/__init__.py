"""The Jobconsole queue engine: Redis and the standard library only, no Django.

Django code (models, admin, views, management commands) is a thin layer over this package.
"""

from jobconsole.core.client import Client, JobSpec
from jobconsole.core.context import JobContext
from jobconsole.core.errors import (
    Cancelled,
    DuplicateJob,
    InvalidJob,
    JobNotFound,
    JobQueueError,
    JobStateConflict,
    NotReplicated,
    PermanentError,
    RedisFull,
    Retry,
    TaskTimeout,
    UndecodablePayload,
    UnknownTask,
)
from jobconsole.core.hooks import TaskHooks
from jobconsole.core.job import Attempt, Job
from jobconsole.core.replace import Replace
from jobconsole.core.results import EnqueueResult
from jobconsole.core.states import JobState
from jobconsole.core.tasks import Task, TaskRegistry, default_registry, task
from jobconsole.core.worker import Worker
from jobconsole.core.workflows import InvalidWorkflow, Step, WorkflowResult

__all__ = [
    "Attempt",
    "Cancelled",
    "Client",
    "DuplicateJob",
    "EnqueueResult",
    "InvalidJob",
    "InvalidWorkflow",
    "Job",
    "JobContext",
    "JobNotFound",
    "JobQueueError",
    "JobSpec",
    "JobState",
    "JobStateConflict",
    "NotReplicated",
    "PermanentError",
    "RedisFull",
    "Replace",
    "Retry",
    "Step",
    "Task",
    "TaskHooks",
    "TaskRegistry",
    "TaskTimeout",
    "UndecodablePayload",
    "UnknownTask",
    "Worker",
    "WorkflowResult",
    "default_registry",
    "task",
]
