"""The health of the queues, by Runqueue's rules: green, yellow or red, with the reasons in sentences.

- **delays**: a queue's oldest ready job has waited WARN_DELAY (yellow) or ALARM_DELAY (red). Paused queues are
  left out: their jobs wait because an operator said so.
- **retries**: within the last WINDOW seconds a job of a task was retried WARN_RETRIES or ALARM_RETRIES times
  (its n-th retry; the counters' `retry_max`).
- **failures**: running jobs whose lease deadline passed more than OVERDUE_GRACE ago (their worker is gone and
  nothing recovered them: is any worker or `runrecoverer` running?) make the queue red.
- **failure rates**: a task whose share of failed attempts within the window reached WARN_FAILURE_RATE or
  ALARM_FAILURE_RATE, once it had MIN_ATTEMPTS attempts.

Thresholds come from the HEALTH settings, overridden per queue (HEALTH.QUEUES) and then per task (HEALTH.TASKS);
a threshold of 0 turns its level off. Figures come from `queries.queues.gauges` (O(log n) per queue) and the counters
(metrics/series.py): no job is read. `Health.details()` has the shape of Runqueue's health check
({delays, retries, failures}), plus the failure rates.
"""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import IntEnum
from typing import Any

from jobconsole.conf import HealthConfig, health_config
from jobconsole.core.metrics import RETRY_MAX
from jobconsole.core.queries import Queries
from jobconsole.core.queries.queues import QueueGauges
from jobconsole.engine import get_client
from jobconsole.metrics.series import gather
from jobconsole.metrics.windows import MINUTE, Window, floor_time


class Level(IntEnum):
    GREEN = 0
    YELLOW = 1
    RED = 2

    @property
    def code(self) -> str:
        """Runqueue's letter: g, y or r."""
        return "gyr"[self.value]

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Thresholds:
    warn_delay: float
    alarm_delay: float
    warn_retries: int
    alarm_retries: int
    warn_failure_rate: float
    alarm_failure_rate: float
    min_attempts: int


def thresholds(queue: str, task: str | None = None, config: HealthConfig | None = None) -> Thresholds:
    """The thresholds of a queue (and a task on it): the defaults, the queue's overrides, then the task's."""
    config = config or health_config()
    values: dict[str, Any] = {
        name: config[name]
        for name in ("WARN_DELAY", "ALARM_DELAY", "WARN_RETRIES", "ALARM_RETRIES", "WARN_FAILURE_RATE",
                     "ALARM_FAILURE_RATE", "MIN_ATTEMPTS")
    }  # fmt: skip
    values.update(config["QUEUES"].get(queue, {}))
    if task is not None:
        values.update(config["TASKS"].get(task, {}))
    return Thresholds(**{name.lower(): value for name, value in values.items()})


def judge(value: float, warn: float, alarm: float) -> Level:
    """The level a figure reaches (a threshold of 0 or less is off)."""
    if alarm > 0 and value >= alarm:
        return Level.RED
    if warn > 0 and value >= warn:
        return Level.YELLOW
    return Level.GREEN


@dataclass(frozen=True, slots=True)
class Reason:
    level: Level
    rule: str  # "delay", "retries", "overdue" or "failure_rate"
    queue: str
    task: str | None
    value: float  # the figure: seconds, a retry number, jobs, or a share (0 to 1)
    threshold: float  # the one it reached
    message: str


@dataclass(frozen=True, slots=True)
class TaskHealth:
    queue: str
    task: str
    level: Level
    completed: int
    failed: int  # failed attempts in the window
    retried: int
    dead: int
    max_retry: int  # the highest retry number of the window

    @property
    def attempts(self) -> int:
        return self.completed + self.failed

    @property
    def failure_rate(self) -> float | None:
        return self.failed / self.attempts if self.attempts else None


@dataclass(frozen=True, slots=True)
class QueueHealth:
    queue: str
    level: Level
    paused: bool
    queued: int
    scheduled: int
    running: int
    dead: int
    oldest_wait: float | None  # seconds
    overdue: int  # running jobs past their lease deadline (and the grace)
    tasks: list[TaskHealth] = field(default_factory=list)

    @property
    def max_retry(self) -> int:
        return max((t.max_retry for t in self.tasks), default=0)


@dataclass(frozen=True, slots=True)
class Health:
    level: Level
    reasons: list[Reason]  # worst first
    queues: list[QueueHealth]  # by name
    at: datetime  # Redis's clock
    window: float  # seconds the retry and failure rules counted
    silenced: list[Any] = field(default_factory=list)  # alarms.Silenced: there, but counting toward no level

    @property
    def status(self) -> str:
        return self.level.label

    def details(self) -> dict[str, list[dict[str, Any]]]:
        """The figures in the shape of Runqueue's health check: per queue its delay (seconds) and its jobs past
        their deadline (failures), per queue and task the highest retry number, plus the failure rates. Each entry
        names its `topic` as Runqueue's did, for its clients: the task, or for a queue's figures the queue (a
        task's queue is named after it unless it names another)."""
        return {
            "delays": [
                {"topic": q.queue, "queue": q.queue, "delay": q.oldest_wait or 0.0, "paused": q.paused}
                for q in self.queues
            ],
            "retries": [
                {"topic": t.task, "queue": t.queue, "task": t.task, "max_retries": t.max_retry}
                for q in self.queues
                for t in q.tasks
            ],
            "failures": [{"topic": q.queue, "queue": q.queue, "failures": q.overdue} for q in self.queues],
            "failure_rates": [
                {"queue": t.queue, "task": t.task, "attempts": t.attempts, "failed": t.failed, "rate": t.failure_rate}
                for q in self.queues
                for t in q.tasks
            ],
        }


def check(queues: Sequence[str] | None = None, *, queries: Queries | None = None, silences: bool = True) -> Health:
    """The health of these queues (default: every queue), now; an alarm an operator silenced (alarms.py) is set
    apart in `silenced` and counts toward no level (`silences=False`: every alarm counts)."""
    queries = queries or get_client().queries
    config = health_config()
    names = list(queues) if queues is not None else queries.queues.names()
    gauges = queries.queues.gauges(names, grace_ms=int(config["OVERDUE_GRACE"] * 1000))
    if not gauges:
        return Health(Level.GREEN, [], [], datetime.now(UTC), config["WINDOW"])
    now = gauges[0].at
    window = Window(floor_time(now - timedelta(seconds=config["WINDOW"]), MINUTE), now, MINUTE)
    totals = gather(
        window, queries, queues=names, group=("queue", "task"),
        names=("completed", "failed", "retried", "dead", RETRY_MAX),
    )  # fmt: skip
    by_task: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for (queue, task, metric), value in totals.items():
        by_task[queue][task][metric] = value
    reasons: list[Reason] = []
    results = [_queue_health(g, by_task.get(g.queue, {}), config, reasons) for g in gauges]
    reasons.sort(key=lambda r: (-r.level, r.queue, r.task or "", r.rule))
    silenced: list[Any] = []
    if silences:
        from jobconsole import alarms  # it imports this module's types

        reasons, silenced = alarms.split(reasons, resolve=queues is None)
        if silenced:
            results = [_without_silenced(q, reasons) for q in results]
    level = max((r.level for r in reasons), default=Level.GREEN)
    return Health(level, reasons, sorted(results, key=lambda q: q.queue), now, config["WINDOW"], silenced)


def _without_silenced(q: QueueHealth, loud: list[Reason]) -> QueueHealth:
    """A queue's and its tasks' levels from the reasons that still shout."""
    mine = [r for r in loud if r.queue == q.queue]
    tasks = [replace(t, level=max((r.level for r in mine if r.task == t.task), default=Level.GREEN)) for t in q.tasks]
    return replace(q, level=max((r.level for r in mine), default=Level.GREEN), tasks=tasks)


def _queue_health(
    g: QueueGauges, tasks: dict[str, dict[str, int]], config: HealthConfig, reasons: list[Reason]
) -> QueueHealth:
    found: list[Reason] = []
    limits = thresholds(g.queue, config=config)
    wait = g.oldest_wait
    if wait is not None and not g.paused:
        level = judge(wait, limits.warn_delay, limits.alarm_delay)
        if level:
            limit = limits.alarm_delay if level is Level.RED else limits.warn_delay
            found.append(Reason(
                level, "delay", g.queue, None, wait, limit,
                f"Queue {g.queue}: the oldest waiting job has waited {duration(wait)} "
                f"({_kind(level)} at {duration(limit)}).",
            ))  # fmt: skip
    if g.overdue:
        found.append(Reason(
            Level.RED, "overdue", g.queue, None, g.overdue, config["OVERDUE_GRACE"],
            f"Queue {g.queue}: {_jobs(g.overdue)} running more than {duration(config['OVERDUE_GRACE'])} past "
            f"{'its' if g.overdue == 1 else 'their'} lease deadline; is a worker or runrecoverer running?",
        ))  # fmt: skip
    window = duration(config["WINDOW"])
    task_health = []
    for task, values in sorted(tasks.items()):
        t = TaskHealth(
            g.queue, task, Level.GREEN, values.get("completed", 0), values.get("failed", 0),
            values.get("retried", 0), values.get("dead", 0), values.get(RETRY_MAX, 0),
        )  # fmt: skip
        own: list[Reason] = []
        limits = thresholds(g.queue, task, config)
        level = judge(t.max_retry, limits.warn_retries, limits.alarm_retries)
        if level:
            limit = limits.alarm_retries if level is Level.RED else limits.warn_retries
            own.append(Reason(
                level, "retries", g.queue, task, t.max_retry, limit,
                f"Task {task} on queue {g.queue}: a job was retried {t.max_retry} times in the last {window} "
                f"({_kind(level)} at {limit}).",
            ))  # fmt: skip
        rate = t.failure_rate
        if rate is not None and t.attempts >= limits.min_attempts:
            level = judge(rate, limits.warn_failure_rate, limits.alarm_failure_rate)
            if level:
                limit = limits.alarm_failure_rate if level is Level.RED else limits.warn_failure_rate
                own.append(Reason(
                    level, "failure_rate", g.queue, task, rate, limit,
                    f"Task {task} on queue {g.queue}: {t.failed} of {t.attempts} attempts failed in the last "
                    f"{window} ({rate:.0%}; {_kind(level)} at {limit:.0%}).",
                ))  # fmt: skip
        task_level = max((r.level for r in own), default=Level.GREEN)
        task_health.append(replace(t, level=task_level))
        found += own
    reasons += found
    return QueueHealth(
        g.queue, max((r.level for r in found), default=Level.GREEN), g.paused, g.queued, g.scheduled, g.running,
        g.dead, wait, g.overdue, task_health,
    )  # fmt: skip


def _kind(level: Level) -> str:
    return "alarm" if level is Level.RED else "warning"


def _jobs(n: int) -> str:
    return "1 job is" if n == 1 else f"{n} jobs are"


def duration(seconds: float) -> str:
    """A duration as people say it: 45 s, 3 min 5 s, 2 h 10 min, 3 d 4 h."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min" + (f" {s % 60} s" if s % 60 else "")
    if s < 86_400:
        return f"{s // 3600} h" + (f" {s % 3600 // 60} min" if s % 3600 // 60 else "")
    return f"{s // 86_400} d" + (f" {s % 86_400 // 3600} h" if s % 86_400 // 3600 else "")
