"""The intake: jobs a fast enqueue accepted with one XADD, made into job hashes by whatever touches the
queue next (drain_intake in lua/_lib.lua). Code that scans a queue's Redis sets directly (the mirror's
resync, bulk cleaning) drains first, so it never misses an accepted job."""

import redis

from jobconsole.core import scripts
from jobconsole.core.keys import queue_keys

DEFAULT_EVENTS_MAXLEN = 100_000


def drain(connection: "redis.Redis", queue: str, events_maxlen: int = DEFAULT_EVENTS_MAXLEN) -> int:
    """Turn the queue's intake entries into jobs now; returns how many there were."""
    return int(scripts.run(connection, *drain_call(queue, events_maxlen)))


def drain_call(queue: str, events_maxlen: int = DEFAULT_EVENTS_MAXLEN) -> scripts.Call:
    """The script call of `drain`, for a caller that batches it with others."""
    k = queue_keys(queue)
    return "drain", k.drain_keys, [k.job_prefix, events_maxlen]
