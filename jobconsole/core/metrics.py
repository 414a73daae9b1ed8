"""The per-minute counters' metric names and the latency histograms' buckets: the one definition the Lua scripts
(through `LUA_CONSTANTS`, which scripts.py puts ahead of every script) and the Python readers share.

Each queue's `stats` hash holds one field per minute, metric and task: ``"<minute>|<metric>|<task>"`` where
minute is Unix minutes (Redis's clock). Besides the plain counters, three histograms per minute and task:

- ``wait_h:<i>``: jobs a claim leased after waiting in the ready set for a time in bucket i;
- ``done_h:<i>``: attempts that completed after running for a time in bucket i;
- ``fail_h:<i>``: attempts that failed after running for a time in bucket i.

And two of end-to-end time, from the job's enqueue to the end of an attempt (Jobbers' end_to_end_latency; a
retried job's later attempts count from its first enqueue):

- ``e2e_done_h:<i>``: attempts that completed, by time since the enqueue;
- ``e2e_fail_h:<i>``: attempts that failed, by time since the enqueue.

Bucket 0 holds times under 1 ms; bucket i (1 to 22) holds [2^(i-1), 2^i) ms; bucket 23 holds 2^22 ms (about
70 minutes) and longer. A script call adds one HINCRBY per task and bucket it touched, not per job.

The histograms are counts too, so the hot path does not count the same jobs twice: a claim counts its jobs in
``wait_h`` only, not in ``started``, and an acknowledgement counts them in ``done_h`` only, not in
``completed``. Readers never see the difference: `queries.stats` adds the histograms back (`with_totals`), so
``started`` and ``completed`` read as every job started and completed. (A claim or an acknowledgement of jobs in
one bucket thus writes as many fields as before the histograms existed.) A job handed straight to an idle worker
(enqueue.lua, or a leased intake entry) waited 0 ms and is counted in ``started`` only: its wait is the
difference ``started - sum(wait_h)``, which readers add to bucket 0 (`zero_waits`).

``retry_max``: the highest retry number of the minute and task (a job's n-th retry is number n): how many
times the most-retried job had failed, which the health rules compare with their retry counts. It is a maximum,
not a sum: readers combine it with max().
"""

import math
from collections.abc import Mapping, Sequence

COUNTERS: tuple[str, ...] = (
    "enqueued",
    "started",
    "completed",
    "failed",
    "retried",
    "dead",
    "lost",
    "wait_ms",
    "runtime_ms",
)
BUCKETS = 24  # bucket indexes 0 .. 23
LAST = BUCKETS - 1  # the overflow bucket: 2^22 ms and over
WAIT = "wait_h:"  # + bucket index; each one also a job started
DONE = "done_h:"  # + bucket index; each one also a job completed
FAIL = "fail_h:"  # + bucket index
E2E_DONE = "e2e_done_h:"  # + bucket index: completed this long after the enqueue
E2E_FAIL = "e2e_fail_h:"  # + bucket index: failed this long after the enqueue
RETRY_MAX = "retry_max"

WAIT_METRICS: tuple[str, ...] = tuple(f"{WAIT}{i}" for i in range(BUCKETS))
DONE_METRICS: tuple[str, ...] = tuple(f"{DONE}{i}" for i in range(BUCKETS))
FAIL_METRICS: tuple[str, ...] = tuple(f"{FAIL}{i}" for i in range(BUCKETS))
E2E_METRICS: tuple[str, ...] = tuple(f"{p}{i}" for p in (E2E_DONE, E2E_FAIL) for i in range(BUCKETS))
# What the console's charts and task pages read (the end-to-end histograms are for the exported metrics only:
# reading them too would add half again to every live read).
CHARTED: tuple[str, ...] = COUNTERS + WAIT_METRICS + DONE_METRICS + FAIL_METRICS
SUMMED: tuple[str, ...] = CHARTED + E2E_METRICS  # combined by addition
ALL: tuple[str, ...] = (*SUMMED, RETRY_MAX)
# The totals the hot path leaves to the readers: metric -> the histogram whose counts it also holds.
TOTALS: dict[str, str] = {"started": WAIT, "completed": DONE}

# Prepended to every script (scripts.py): the histogram's last bucket, so Lua and Python bucket alike.
LUA_CONSTANTS = f"local HIST_LAST = {LAST}  -- jobconsole/core/metrics.py\n"


def bucket_of(ms: float) -> int:
    """The bucket of a duration in milliseconds (what hist_bucket in lua/_lib.lua computes)."""
    if ms < 1:
        return 0
    return min(math.frexp(ms)[1], LAST)


def bounds(i: int) -> tuple[float, float | None]:
    """Bucket i's range in milliseconds: [low, high); high is None for the overflow bucket."""
    if i == 0:
        return 0.0, 1.0
    if i >= LAST:
        return float(2 ** (LAST - 1)), None
    return float(2 ** (i - 1)), float(2**i)


def zero_waits(started: int, wait_counts: Sequence[int]) -> int:
    """Jobs that started without waiting (handed straight to an idle worker): see the module's docstring."""
    return max(started - sum(wait_counts), 0)


def percentile(counts: Sequence[int], q: float) -> float | None:
    """The q-th quantile (0 < q < 1) in milliseconds of a histogram (`counts` by bucket), interpolated linearly
    inside its bucket; None when the histogram is empty. The overflow bucket answers its lower edge."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(counts):
        if n <= 0:
            continue
        if seen + n >= rank:
            low, high = bounds(i)
            if high is None:
                return low
            return low + (high - low) * (rank - seen) / n
        seen += n
    return bounds(len(counts) - 1)[0]  # rounding left the rank past the end


def histogram(values: Mapping[str, int], *prefixes: str) -> list[int]:
    """Counts by bucket from metric -> value pairs such as {"done_h:3": 5}, of the histograms named (summed)."""
    counts = [0] * BUCKETS
    for metric, value in values.items():
        prefix, _, index = metric.partition(":")
        if f"{prefix}:" in prefixes and index.isdigit() and int(index) < BUCKETS:
            counts[int(index)] += value
    return counts


def run_histogram(values: Mapping[str, int]) -> list[int]:
    """Run times of every attempt that ended, completed or failed."""
    return histogram(values, DONE, FAIL)


def wait_histogram(values: Mapping[str, int]) -> list[int]:
    """Times in queue, with the jobs handed straight to a worker in bucket 0 (`values` with the totals added)."""
    counts = histogram(values, WAIT)
    counts[0] += zero_waits(values.get("started", 0), counts)
    return counts
