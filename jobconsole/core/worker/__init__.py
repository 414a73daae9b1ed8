"""The worker: claims jobs under leases, runs them, heartbeats, reports outcomes, and shuts down by policy.

Its parts, one job each, wired together by the Worker (dispatcher.py):
launcher.py starts leased jobs; exchange.py reports outcomes and claims in one round trip; idle.py waits
for work without polling, and watch.py blocks for it on a thread of its own while jobs run; heartbeats.py
renews leases; registry.py keeps the worker's registry entry; clock.py reads Redis's clock; shutdown.py stops
by the tasks' on_shutdown policies.
"""

from jobconsole.core.worker.dispatcher import Worker
from jobconsole.core.worker.exchange import (
    PREFETCH_BELOW_MS,
    PREFETCH_MAX,
    PREFETCH_MIN,
    PREFETCH_WORK_MS,
    prefetch_count,
)

__all__ = ["PREFETCH_BELOW_MS", "PREFETCH_MAX", "PREFETCH_MIN", "PREFETCH_WORK_MS", "Worker", "prefetch_count"]
