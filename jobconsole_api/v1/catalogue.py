"""Every operation of /api/v1, declared by importing the modules that declare them (in the order the document
lists them)."""

from jobconsole_api.v1 import jobs, unique, workflows, queues, workers, flow  # noqa: F401, I001  (the docs' order)
from jobconsole_api.v1 import alarms, schedules, deadletters, operations, stats  # noqa: F401
from jobconsole_api.v1.routing import OPERATIONS

__all__ = ["OPERATIONS"]
