"""Statistics and time series: the figures behind the console's overview and charts (jobconsole/metrics/)."""

from typing import Any

from jobconsole.engine import get_client
from jobconsole.metrics.series import COUNTED, Series, depth, rates
from jobconsole.metrics.windows import SPANS
from jobconsole_api.problems import Problem
from jobconsole_api.v1.routing import Call, Param, Reply, Response, operation
from jobconsole_api.v1.schema import NAME_PATTERN, any_object, array, obj, string
from jobconsole_api.v1.shapes import iso

SPAN = Param("span", string("the range: the last hour, day or week", enum=list(SPANS), default="hour"))
QUEUE = Param("queue", string("only this queue", pattern=NAME_PATTERN))
TASK = Param("task", string("only this task", pattern=NAME_PATTERN))
NO_QUEUE = Response("No such queue.")
NUMBERS = {"type": "array", "items": {"type": ["number", "null"]}}


def _known_queue(call: Call) -> str | None:
    queue: str | None = call.params.get("queue")
    if queue is not None and queue not in get_client().queries.queues.names():
        raise Problem(404, f"No queue {queue!r}: no job has used it.")
    return queue


@operation(
    "GET", "/stats", operation_id="get_stats", summary="Queue and task statistics", tag="stats", scope="read",
    params=(SPAN, QUEUE),
    responses={200: Response("Each queue's depth, throughput and time to drain; each task's counts and run "
                             "times over the range.", obj({"queues": array(any_object()), "tasks": array(any_object())},
                                                          ("queues", "tasks"))), 404: NO_QUEUE},
)  # fmt: skip
def stats(call: Call) -> Reply:
    """Per queue: waiting now, ended attempts per minute (last 5 minutes), seconds to drain. Per task over the
    range: enqueued, started, completed, failed, retried, dead, lost; run time mean and p50/p95/p99; time in
    queue p95. A token limited to queues sees its queues (the per-task figures of `queue`, or of its one queue);
    one limited to tasks sees its tasks' figures of its queues."""
    caller = call.caller
    if caller.task_limits and not caller.queue_limits:
        caller.check_unlimited("This route shows every queue's figures, with every task's jobs")
    caller.check_queue(call.params.get("queue"))
    queue = _known_queue(call)
    if caller.queue_limits and queue is None:
        if len(caller.queue_limits) > 1:
            raise Problem(403, "The per-task figures span every queue: a token limited to several queues names "
                               f"one of them with ?queue= ({', '.join(sorted(caller.queue_limits))}).")  # fmt: skip
        [queue] = caller.queue_limits
    queues = [
        {"queue": r.queue, "waiting": r.waiting, "throughput_per_minute": r.throughput,
         "drain_seconds": r.drain_seconds}
        for r in rates([queue] if queue else None)
    ]  # fmt: skip
    tasks: list[dict[str, Any]] = []
    for t in Series(call.params["span"], queue=queue).tasks():
        if caller.task_limits and t.task not in caller.task_limits:
            continue
        tasks.append({
            "task": t.task, **{name: getattr(t, name) for name in COUNTED}, "max_retry": t.max_retry,
            "success_rate": t.success_rate, "runtime_mean": t.runtime_mean, **{
                f"runtime_{k}" if k.startswith("p") else k: v for k, v in t.percentiles.items()
            },
        })  # fmt: skip
    return Reply(200, {"queues": queues, "tasks": tasks})


SERIES = obj(
    {
        "resolution": {"type": "integer", "description": "seconds per bucket"},
        "times": array(string(format="date-time"), "each bucket's start"),
        "counts": obj({name: NUMBERS for name in COUNTED}, COUNTED),
        "wait": obj({q: NUMBERS for q in ("p50", "p95", "p99")}, ("p50", "p95", "p99"),
                    "time in queue (seconds) per bucket"),
        "run": obj({q: NUMBERS for q in ("p50", "p95", "p99")}, ("p50", "p95", "p99"), "run time (seconds) per bucket"),
    },
    ("resolution", "times", "counts", "wait", "run"),
)  # fmt: skip


@operation(
    "GET", "/series", operation_id="get_series", summary="Counts and latency over time", tag="stats", scope="read",
    params=(SPAN, QUEUE, TASK),
    responses={200: Response("One value per bucket of each series.", SERIES), 404: NO_QUEUE},
)  # fmt: skip
def series(call: Call) -> Reply:
    """Jobs per bucket (enqueued, started, completed, failed, retried, dead, lost) and time-in-queue and run-time
    percentiles, over the range, for every queue or one, every task or one. The last bucket is still filling.
    Not for a limited token (the series span every queue)."""
    call.caller.check_unlimited()
    data = Series(call.params["span"], queue=_known_queue(call), task=call.params.get("task"))
    counts, latency = data.counts(), data.latency()
    return Reply(200, {
        "resolution": counts.resolution, "times": [iso(t) for t in counts.times],
        "counts": {name: getattr(counts, name) for name in COUNTED},
        "wait": {"p50": latency.wait.p50, "p95": latency.wait.p95, "p99": latency.wait.p99},
        "run": {"p50": latency.run.p50, "p95": latency.run.p95, "p99": latency.run.p99},
    })  # fmt: skip


DEPTH = obj(
    {"items": array(obj({
        "queue": string(), "resolution": {"type": "integer"}, "times": array(string(format="date-time")),
        "queued": NUMBERS, "scheduled": NUMBERS, "running": NUMBERS, "dead": NUMBERS, "oldest_wait": NUMBERS,
    }, ("queue", "times")))},
    ("items",),
)  # fmt: skip


@operation(
    "GET", "/series/depth", operation_id="get_depth", summary="Queue depth over time", tag="stats", scope="read",
    params=(SPAN, QUEUE),
    responses={200: Response("Each queue's depth samples; the last is now.", DEPTH), 404: NO_QUEUE},
)  # fmt: skip
def depth_series(call: Call) -> Reply:
    """Each queue's waiting, scheduled, running and dead jobs and its oldest wait (seconds) over the range. Not
    for a limited token (the series span every queue)."""
    call.caller.check_unlimited()
    items = [
        {"queue": d.queue, "resolution": d.resolution, "times": [iso(t) for t in d.times], "queued": d.queued,
         "scheduled": d.scheduled, "running": d.running, "dead": d.dead, "oldest_wait": d.oldest_wait}
        for d in depth(call.params["span"], queue=_known_queue(call))
    ]  # fmt: skip
    return Reply(200, {"items": items})
