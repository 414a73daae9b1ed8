"""Every exported metric, built from one reading of the engine's counters and gauges: the one definition the
Prometheus endpoint (jobconsole_api/prometheus.py) and the OpenTelemetry export (otlp.py) both render.

A reading (`read`) is the day's totals (totals.py), every queue's gauges (gauges.lua, O(log n) per queue) and the
worker registry: nothing scans jobs. `families` turns it into metric families in a neutral form (`Family`), named
as the seeds named them (Jobbers: tasks_processed, execution_time, end_to_end_latency, time_in_queue,
tasks_selected, tasks_retried, tasks_dead_lettered; the Go scheduler: jobs_submitted_total, jobs_processed_total,
job_duration_seconds), plus gauges of our own under `jobconsole_`. docs/metrics.md lists them with their labels
and sources.

Histograms use the engine's latency buckets (core/metrics.py). Times are whole milliseconds, so bucket i
(1 <= i < 23), [2^(i-1), 2^i) ms, holds exactly the times up to 2^i - 1 ms: that is its upper bound here,
inclusive as Prometheus's `le` is (0 for bucket 0, times under 1 ms); the overflow bucket is +Inf.
"""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from jobconsole.core import metrics
from jobconsole.core.queries import Queries
from jobconsole.core.queries.queues import QueueGauges
from jobconsole.core.queries.workers import WorkerInfo
from jobconsole.metrics.totals import Counts, DayTotals, day_totals

type Kind = Literal["counter", "gauge", "histogram"]
type Labels = dict[str, str]

ALL = "all"  # the value of a seed's label the engine does not count by (role, priority): the sum over it
STATUSES = {"completed": "completed", "failed": "failed", "lost": "lost"}  # status label -> counter
RUN_HISTOGRAMS = {"completed": metrics.DONE, "failed": metrics.FAIL}  # status label -> histogram prefix
END_TO_END_HISTOGRAMS = {"completed": metrics.E2E_DONE, "failed": metrics.E2E_FAIL}
# Upper bounds of the finite buckets, in milliseconds (see the module's docstring): 0, 1, 3, 7, ... 2^22 - 1.
BOUNDS_MS: tuple[int, ...] = (0, *(2**i - 1 for i in range(1, metrics.LAST)))
DEPTHS = ("waiting", "scheduled", "running", "dead")


@dataclass(frozen=True, slots=True)
class Point:
    """One series of a family: a counter's or gauge's value, or a histogram's counts by bucket (not cumulative;
    len(BOUNDS_MS) + 1, the last one the overflow) and its sum (None when the engine does not keep it)."""

    labels: Labels
    value: float = 0.0
    buckets: tuple[int, ...] = ()
    sum: float | None = None

    @property
    def count(self) -> int:
        return sum(self.buckets)


@dataclass(frozen=True, slots=True)
class Family:
    name: str  # as exposed; a counter's Prometheus samples end in _total (added unless the name has it)
    kind: Kind
    help: str
    unit: str  # "ms", "s" or "" (a count)
    labels: tuple[str, ...]
    points: list[Point] = field(default_factory=list)

    @property
    def bounds(self) -> tuple[float, ...]:
        """A histogram's finite upper bounds in the family's unit."""
        scale = 1000 if self.unit == "s" else 1
        return tuple(b / scale for b in BOUNDS_MS)


@dataclass(frozen=True, slots=True)
class Reading:
    totals: DayTotals
    gauges: list[QueueGauges]
    workers: list[WorkerInfo]
    versions: dict[str, str]  # task -> its registered version

    @property
    def since(self) -> datetime:
        """When the counters and histograms started counting (00:00 UTC): their start, or `_created`."""
        return self.totals.since

    @property
    def at(self) -> datetime:
        return self.totals.at


def read(queries: Queries) -> Reading:
    """One reading of everything exported. Raises redis.RedisError when Redis does not answer."""
    queues = queries.queues.names()
    options = queries.tasks.options()
    versions = {task: str(opts.get("version", "")) for task, opts in options.items()}
    return Reading(day_totals(queries, queues), queries.queues.gauges(queues), queries.workers.all(), versions)


def families(reading: Reading) -> list[Family]:
    """Every metric family of a reading, in the order docs/metrics.md lists them."""
    return [*_jobbers(reading), *_goscheduler(reading), *_gauges(reading)]


def _jobbers(reading: Reading) -> list[Family]:
    processed = Family("tasks_processed", "counter", "attempts that ended, by how", "", ("queue", "task", "status"))
    execution = Family(
        "execution_time", "histogram", "run time of attempts that ended, by how (ms)", "ms", ("queue", "task", "status")
    )
    end_to_end = Family(
        "end_to_end_latency", "histogram", "time from enqueue to the end of an attempt, by how (ms)", "ms",
        ("queue", "task", "status"),
    )  # fmt: skip
    waiting = Family(
        "time_in_queue", "histogram", "time from ready to claimed of jobs workers took (ms)", "ms",
        ("queue", "role", "task"),
    )  # fmt: skip
    selected = Family("tasks_selected", "counter", "jobs workers took to run", "", ("queue", "role", "task"))
    retried = Family("tasks_retried", "counter", "failed attempts that were retried", "", ("queue", "task", "version"))
    dead = Family("tasks_dead_lettered", "counter", "jobs moved to the dead letters", "", ("queue", "task", "version"))
    for (queue, task), counts in sorted(reading.totals.counts.items()):
        version = reading.versions.get(task, "")
        for status, counter in STATUSES.items():
            processed.points.append(Point({"queue": queue, "task": task, "status": status}, counts.get(counter, 0)))
        for status, prefix in RUN_HISTOGRAMS.items():
            buckets = tuple(metrics.histogram(counts, prefix))
            execution.points.append(Point({"queue": queue, "task": task, "status": status}, buckets=buckets))
        for status, prefix in END_TO_END_HISTOGRAMS.items():
            buckets = tuple(metrics.histogram(counts, prefix))
            end_to_end.points.append(Point({"queue": queue, "task": task, "status": status}, buckets=buckets))
        labels = {"queue": queue, "role": ALL, "task": task}
        waits = tuple(metrics.wait_histogram(counts))
        waiting.points.append(Point(labels, buckets=waits, sum=float(counts.get("wait_ms", 0))))
        selected.points.append(Point(labels, counts.get("started", 0)))
        retried.points.append(Point({"queue": queue, "task": task, "version": version}, counts.get("retried", 0)))
        dead.points.append(Point({"queue": queue, "task": task, "version": version}, counts.get("dead", 0)))
    return [processed, execution, end_to_end, waiting, selected, retried, dead]


def _goscheduler(reading: Reading) -> list[Family]:
    submitted = Family("jobs_submitted_total", "counter", "jobs enqueued", "", ("type", "priority"))
    processed = Family("jobs_processed_total", "counter", "attempts that ended, by how", "", ("type", "status"))
    duration = Family("job_duration_seconds", "histogram", "run time of attempts that ended", "s", ("type",))
    by_task: dict[str, Counts] = reading.totals.by_task()
    for task, counts in sorted(by_task.items()):
        submitted.points.append(Point({"type": task, "priority": ALL}, counts.get("enqueued", 0)))
        for status, counter in STATUSES.items():
            processed.points.append(Point({"type": task, "status": status}, counts.get(counter, 0)))
        runs = tuple(metrics.run_histogram(counts))
        duration.points.append(Point({"type": task}, buckets=runs, sum=counts.get("runtime_ms", 0) / 1000))
    return [submitted, processed, duration]


def _gauges(reading: Reading) -> list[Family]:
    depth = Family("jobconsole_queue_jobs", "gauge", "jobs in a queue by state, now", "", ("queue", "state"))
    oldest = Family(
        "jobconsole_queue_oldest_wait_seconds", "gauge", "how long the longest-waiting ready job has waited", "s",
        ("queue",),
    )  # fmt: skip
    paused = Family("jobconsole_queue_paused", "gauge", "1 while the queue is paused", "", ("queue",))
    serving = Family("jobconsole_queue_workers", "gauge", "live workers that take jobs from the queue", "", ("queue",))
    workers = Family("jobconsole_workers", "gauge", "registered workers by state", "", ("state",))
    slots = Family("jobconsole_worker_threads", "gauge", "task threads of the live workers", "", ())
    live = [w for w in reading.workers if w.state != "gone"]
    for g in reading.gauges:
        figures = {"waiting": g.queued, "scheduled": g.scheduled, "running": g.running, "dead": g.dead}
        for state in DEPTHS:
            depth.points.append(Point({"queue": g.queue, "state": state}, figures[state]))
        oldest.points.append(Point({"queue": g.queue}, g.oldest_wait or 0.0))
        paused.points.append(Point({"queue": g.queue}, 1.0 if g.paused else 0.0))
        serving.points.append(Point({"queue": g.queue}, sum(1 for w in live if g.queue in w.queues)))
    states = dict.fromkeys(("running", "quiet", "stopping", "gone"), 0)
    for w in reading.workers:
        states[w.state] = states.get(w.state, 0) + 1
    for state, n in states.items():
        workers.points.append(Point({"state": state}, n))
    slots.points.append(Point({}, sum(w.concurrency for w in live)))
    return [depth, oldest, paused, serving, workers, slots]
