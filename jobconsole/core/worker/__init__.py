"""The worker: claims jobs under leases, runs them, heartbeats, reports outcomes, and shuts down by policy."""

from jobconsole.core.worker.dispatcher import (
    PREFETCH_BELOW_MS,
    PREFETCH_MAX,
    PREFETCH_MIN,
    PREFETCH_WORK_MS,
    Worker,
    prefetch_count,
)

__all__ = ["PREFETCH_BELOW_MS", "PREFETCH_MAX", "PREFETCH_MIN", "PREFETCH_WORK_MS", "Worker", "prefetch_count"]
