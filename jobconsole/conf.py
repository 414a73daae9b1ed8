"""Every JOBCONSOLE setting in one place: its default, its environment variable and what it does.

A project sets them in its settings module as a dict, e.g.

    JOBCONSOLE = {"REDIS_URL": "redis://redis:6379/0", "MIRROR": {"BATCH": 500}}

Precedence, highest first: a key in settings.JOBCONSOLE, then the setting's environment variable (where
it has one, see SETTINGS), then the default. The groups MIRROR, RETENTION, DB_RETENTION, OUTBOX, METRICS,
HEALTH, BULK, API and PERIODIC merge key by key, so {"MIRROR": {"BATCH": 500}} changes BATCH and keeps the other
MIRROR defaults.

The values are read once per process (get_config() is cached; a change of settings.JOBCONSOLE through
Django's setting_changed signal, as tests make, clears the cache). Unknown keys, wrong types and
unreadable environment variables are errors: the system check jobconsole.E001..E004 reports them, and
get_config() refuses to run with them.
"""

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from typing import Any, TypedDict, cast

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from jobconsole.core.client import DEFAULT_SPIN_US
from jobconsole.core.errors import InvalidJob
from jobconsole.core.groups import Group
from jobconsole.core.maintenance import Retention
from jobconsole.core.periodic import Schedule
from jobconsole.core.roles import check_name
from jobconsole.core.states import DB_RETENTION

DAY = 86_400

# The value kinds a setting can have; an environment variable is parsed into its setting's kind.
Kind = type[str] | type[bool] | type[int] | type[float] | type[list[str]] | type[dict[str, Any]]


@dataclass(frozen=True)
class Setting:
    """One setting: `name` is "KEY" or "GROUP.KEY" (a key of a nested group such as MIRROR)."""

    name: str
    default: Any
    doc: str
    env: str | None = None
    kind: Kind | None = None  # None: the type of the default
    check: Callable[[Any], str | None] | None = None  # what is wrong inside a value of the right kind, or None

    @property
    def type(self) -> Kind:
        return self.kind or cast(Kind, type(self.default))


def _retention_settings() -> list[Setting]:
    # The engine owns these numbers (it cannot import Django); they are written once, in Retention.
    return [
        Setting(f"RETENTION.{state}", float(seconds), f"seconds Redis keeps a {state} job")
        for state, seconds in Retention().as_dict().items()
    ]


def _db_retention_settings() -> list[Setting]:
    # The state table (core/states.py) holds the defaults; a dead job's dead letter goes with it.
    return [
        Setting(f"DB_RETENTION.{state}", float(seconds),
                f"seconds the database keeps a {state} job" + (" and its dead letter" if state == "dead" else ""))
        for state, seconds in DB_RETENTION.items()
    ]  # fmt: skip


# The health thresholds a queue or a task may override (HEALTH.QUEUES, HEALTH.TASKS), with their kinds. How long a
# job waits is known per queue only (the oldest ready job), so the delays have no per-task override.
QUEUE_THRESHOLDS: dict[str, Kind] = {
    "WARN_DELAY": float,
    "ALARM_DELAY": float,
    "WARN_RETRIES": int,
    "ALARM_RETRIES": int,
    "WARN_FAILURE_RATE": float,
    "ALARM_FAILURE_RATE": float,
    "MIN_ATTEMPTS": int,
}
TASK_THRESHOLDS: dict[str, Kind] = {k: v for k, v in QUEUE_THRESHOLDS.items() if not k.endswith("_DELAY")}


def _overrides_check(allowed: dict[str, Kind], of: str) -> Callable[[Any], str | None]:
    """A check of {name: {threshold: value}} overrides (HEALTH.QUEUES, HEALTH.TASKS)."""

    def check(value: Any) -> str | None:
        for name, overrides in value.items():
            if not isinstance(overrides, Mapping):
                return f"the overrides of {of} {name!r} must be a dict, not {type(overrides).__name__}"
            for key, threshold in overrides.items():
                if key not in allowed:
                    return f"{key!r} (for {of} {name!r}) is not a threshold a {of} can set; known: {', '.join(allowed)}"
                if not _is_kind(threshold, allowed[key]):
                    return f"{key} (for {of} {name!r}) must be {_kind_name(allowed[key])}, not {threshold!r}"
        return None

    return check


def _groups_problem(value: Mapping[str, Any]) -> str | None:
    for name, spec in value.items():
        if not isinstance(spec, Mapping):
            return f"group {name!r} must be a dict such as {{'connections': 2}}, not {type(spec).__name__}"
        try:
            Group.parse(str(name), dict(spec))
        except ValueError as exc:
            return str(exc)
    return None


def _queue_limits_problem(value: Mapping[str, Any]) -> str | None:
    for queue, limit in value.items():
        try:
            check_name(queue, "queue")
        except InvalidJob as exc:
            return str(exc)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            return f"the limit of queue {queue!r} must be a whole number of at least 1, not {limit!r}"
    return None


def _schedules_check(value: Any) -> str | None:
    """PERIODIC.SCHEDULES: {name: {task, cron or every, ...}}, each one a valid engine Schedule."""
    for name, spec in value.items():
        if not isinstance(spec, Mapping):
            return f"schedule {name!r} must be a dict, not {type(spec).__name__}"
        unknown = set(spec) - set(SCHEDULE_FIELDS)
        if unknown:
            return f"schedule {name!r}: unknown keys {sorted(unknown)}; known: {', '.join(SCHEDULE_FIELDS)}"
        try:
            schedule_from_settings(name, spec)
        except (ValueError, TypeError, KeyError) as exc:  # CronError and an unknown time zone are ValueErrors
            return f"schedule {name!r}: {exc}"
    return None


SCHEDULE_FIELDS = ("task", "params", "cron", "every", "queue", "priority", "enabled", "misfire", "timezone")


def schedule_from_settings(name: str, spec: Mapping[str, Any]) -> Schedule:
    """One entry of PERIODIC.SCHEDULES as the engine's Schedule."""
    fields = {key: spec[key] for key in SCHEDULE_FIELDS if key in spec}
    if "every" in fields:
        fields["every"] = float(fields["every"])
    return Schedule(name=name, origin="settings", **fields)


SETTINGS: tuple[Setting, ...] = (
    Setting("REDIS_URL", "redis://127.0.0.1:6379/0", "the Redis holding queues, jobs and events", env="REDIS_URL"),
    Setting(
        "ENQUEUE_REPLICAS",
        0,
        "after each enqueue, wait until this many replicas acknowledged it (Redis WAIT) or raise NotReplicated; "
        "0 waits for none",
        env="JOBCONSOLE_ENQUEUE_REPLICAS",
        check=lambda value: None if value >= 0 else "must be 0 or more",
    ),
    Setting(
        "ENQUEUE_REPLICAS_TIMEOUT",
        1.0,
        "seconds an enqueue waits for ENQUEUE_REPLICAS replicas",
        env="JOBCONSOLE_ENQUEUE_REPLICAS_TIMEOUT",
        check=lambda value: None if 0 < value <= 5 else "must be above 0 and at most 5 seconds",
    ),
    Setting(
        "HOST_ID",
        "",
        "the host a runworker names in its worker id and registry entry; empty: the machine's host name",
        env="JOBCONSOLE_HOST_ID",
    ),
    Setting(
        "TASK_MODULES",
        [],
        "modules imported at start-up to register tasks, besides every installed app's "
        "tasks.py (environment: comma-separated)",
        env="JOBCONSOLE_TASK_MODULES",
        kind=list,
    ),
    Setting("STRICT_ENQUEUE", True, "enqueue refuses a task name this process has not registered"),
    Setting(
        "CLIENT_SPIN_US",
        DEFAULT_SPIN_US,
        "microseconds an enqueue spins for its reply before it sleeps",
        env="JOBCONSOLE_CLIENT_SPIN_US",
    ),
    Setting("EVENTS_MAXLEN", 100_000, "approximate length each queue's event stream is trimmed to"),
    Setting("WORKER_CONCURRENCY", 10, "jobs a runworker runs at once (threads)", env="WORKER_CONCURRENCY"),
    Setting(
        "IN_TRANSACTION",
        "on_commit",
        "what an enqueue of a Django @task or a jobconsole.celery call does inside a database transaction: "
        "'on_commit' (enqueued when it commits, never on rollback), 'outbox' (through the outbox), 'now'",
        env="JOBCONSOLE_IN_TRANSACTION",
        check=lambda value: None if value in ("on_commit", "outbox", "now") else "must be on_commit, outbox or now",
    ),
    Setting(
        "LOG_LEVEL",
        "INFO",
        "level of the jobconsole logger when runworker gives it a handler (a project whose LOGGING configures "
        "neither it nor the root logger)",
        env="JOBCONSOLE_LOG_LEVEL",
        check=lambda value: (
            None
            if value.upper() in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}
            else "must be DEBUG, INFO, WARNING, ERROR or CRITICAL"
        ),
    ),
    Setting(
        "GROUPS",
        {},
        "concurrency groups: name -> {'connections': jobs running at once across all workers, "
        "'requests': [n, 'second'|'minute'|'hour'] starts per period}",
        kind=dict,
        check=lambda value: _groups_problem(value),
    ),
    Setting(
        "QUEUE_LIMITS",
        {},
        "queue -> the most jobs of that queue running at once across all workers",
        kind=dict,
        check=lambda value: _queue_limits_problem(value),
    ),
    Setting(
        "WORKER_EXPIRY",
        3.0,
        "seconds a worker process may go without its heartbeat (sent every third of this) before a recoverer "
        "declares it gone and runs its jobs elsewhere, whatever their lease; a pause longer than this (GC, a "
        "slow Redis, a starved host) costs the worker its jobs",
        env="JOBCONSOLE_WORKER_EXPIRY",
        check=lambda value: None if value >= 1.0 else "must be at least 1 second",
    ),
    Setting(
        "SHUTDOWN_GRACE",
        10.0,
        "seconds a stopping worker waits for the tasks it interrupted (on_shutdown requeue or fail) to stop",
    ),
    Setting(
        "MIRROR.IN_WORKER",
        True,
        "runworker also runs the database mirror, in a child process (in a thread for a one-off --burst or"
        " --max-tasks worker; one leader overall)",
        env="JOBCONSOLE_MIRROR_IN_WORKER",
    ),
    Setting("MIRROR.BATCH", 1000, "events stream entries applied per database transaction (one holds up to 50 jobs)"),
    Setting(
        "MIRROR.BLOCK_MS",
        100,
        "milliseconds of each blocking wait for new events while the mirror is idle (it reads every queue at least "
        "once a second)",
    ),
    Setting(
        "MIRROR.SETTLE_MS",
        10,
        "milliseconds an idle mirror lets pass after new events wake it, before it reads them (out of the way of"
        " the worker starting the job that woke it; a busy mirror never waits)",
    ),
    Setting(
        "MIRROR.PACE_MS",
        50,
        "milliseconds a mirror that has caught up waits before its next read while events keep coming, so that it"
        " writes them in fewer, larger batches (with a backlog it reads batch after batch)",
    ),
    Setting(
        "MIRROR.LOCK_TTL",
        10.0,
        "seconds the mirror's leader lock lives; the leader renews it every third",
        env="JOBCONSOLE_MIRROR_LOCK_TTL",
    ),
    Setting("MIRROR.RETENTION_EVERY", 300.0, "seconds between database retention passes"),
    Setting("MIRROR.RELAY_EVERY", 2.0, "seconds between outbox relay passes"),
    Setting("MIRROR.RESTORE", True, "after Redis lost data, enqueue again the jobs the database knew as live"),
    *_retention_settings(),
    # Rows Redis still holds are never removed, so the database keeps at least the history Redis has.
    *_db_retention_settings(),
    Setting("DB_RETENTION.audit", 365.0 * DAY, "seconds the database keeps an audit record"),
    Setting(
        "OUTBOX.RELAY_AFTER",
        5.0,
        "seconds after an outbox entry was written before the relay publishes it, if its commit hook has not",
    ),
    Setting("OUTBOX.KEEP_PUBLISHED", 7.0 * DAY, "seconds a published outbox entry is kept"),
    Setting(
        "METRICS.ROLLUP_EVERY", 30.0, "seconds between the leader's copies of closed minutes' counters to the database"
    ),
    Setting("METRICS.SAMPLE_EVERY", 30.0, "seconds between the leader's samples of every queue's depth"),
    Setting("METRICS.KEEP_MINUTES", 2.0 * DAY, "seconds the database keeps 1-minute buckets and single depth samples"),
    Setting("METRICS.KEEP_TEN_MINUTES", 14.0 * DAY, "seconds the database keeps 10-minute buckets"),
    Setting("METRICS.KEEP_HOURS", 90.0 * DAY, "seconds the database keeps hourly buckets"),
    Setting("METRICS.MAX_POINTS", 300, "most buckets a series has: a range takes the finest resolution that fits"),
    Setting(
        "METRICS.ANONYMOUS_LOOPBACK",
        False,
        "/metrics answers scrapes from 127.0.0.1 or ::1 without an API token (never a request a proxy forwarded)",
        env="JOBCONSOLE_METRICS_ANONYMOUS_LOOPBACK",
    ),
    Setting("HEALTH.WINDOW", 900.0, "seconds of the recent past the retry and failure rules count"),
    Setting("HEALTH.WARN_DELAY", 180.0, "yellow when a queue's oldest ready job has waited this many seconds"),
    Setting("HEALTH.ALARM_DELAY", 600.0, "red when a queue's oldest ready job has waited this many seconds"),
    Setting("HEALTH.WARN_RETRIES", 3, "yellow when a job was retried this many times within the window"),
    Setting("HEALTH.ALARM_RETRIES", 8, "red when a job was retried this many times within the window"),
    Setting("HEALTH.WARN_FAILURE_RATE", 0.1, "yellow when this share of the window's attempts failed"),
    Setting("HEALTH.ALARM_FAILURE_RATE", 0.5, "red when this share of the window's attempts failed"),
    Setting("HEALTH.MIN_ATTEMPTS", 10, "attempts a window needs before its failure rate is judged"),
    Setting("HEALTH.OVERDUE_GRACE", 10.0, "seconds past its lease deadline a running job counts as overdue (red)"),
    Setting(
        "HEALTH.MIRROR_LAG",
        60.0,
        "seconds the database mirror may lag behind Redis (its oldest unapplied event) before health is degraded;"
        " 0 turns the check off",
    ),
    Setting(
        "HEALTH.QUEUES",
        {},
        "thresholds of single queues: {queue: {threshold: value}}",
        kind=dict,
        check=_overrides_check(QUEUE_THRESHOLDS, "queue"),
    ),
    Setting(
        "HEALTH.TASKS",
        {},
        "thresholds of single tasks (all but the delays): {task: {threshold: value}}",
        kind=dict,
        check=_overrides_check(TASK_THRESHOLDS, "task"),
    ),
    Setting(
        "BULK.ADMIN_THRESHOLD",
        200,
        "an admin bulk action over more rows than this runs as a tracked bulk operation instead of in the request",
        env="JOBCONSOLE_BULK_ADMIN_THRESHOLD",
    ),
    Setting("BULK.CHUNK", 500, "jobs per chunk of a bulk operation (one pipelined round trip and one commit each)"),
    Setting("BULK.PREVIEW_MAX_AGE", 3600.0, "seconds a bulk operation's preview can still be confirmed"),
    Setting(
        "BULK.CONCURRENCY",
        2,
        "bulk operations one runworker's system worker runs at once",
        env="JOBCONSOLE_BULK_CONCURRENCY",
    ),
    Setting(
        "API.ANONYMOUS_SEEDS",
        False,
        "the seed systems' interfaces answer callers without a token (the seeds had none); the native API never does",
        env="JOBCONSOLE_API_ANONYMOUS_SEEDS",
    ),
    Setting("API.MAX_BODY_BYTES", 1_048_576, "largest request body the API reads; a larger one is a 413"),
    Setting("API.MAX_BATCH", 1000, "most jobs one batch submission may carry"),
    Setting("API.PAGE_SIZE", 50, "jobs or dead letters a list returns when the request names no limit"),
    Setting("API.MAX_PAGE_SIZE", 500, "most jobs or dead letters one page of a list may hold"),
    Setting(
        "API.BULK_THRESHOLD",
        200,
        "a resubmit or purge by the API over more dead letters than this runs as a tracked bulk operation",
    ),
    Setting("API.IDEMPOTENCY_TTL", float(DAY), "seconds an Idempotency-Key's first response is kept for its replays"),
    Setting(
        "PERIODIC.SCHEDULES",
        {},
        "periodic jobs: {name: {task, cron or every (seconds), params, queue, priority, enabled, misfire, timezone}}",
        kind=dict,
        check=_schedules_check,
    ),
    Setting(
        "PERIODIC.IN_WORKER",
        True,
        "runworker also runs the periodic scheduler in a thread (one leader among all processes)",
        env="JOBCONSOLE_PERIODIC_IN_WORKER",
    ),
    Setting("PERIODIC.INTERVAL", 1.0, "seconds between the scheduler's passes"),
    Setting(
        "PERIODIC.MISFIRE_GRACE",
        60.0,
        "seconds late a slot may still fire as itself; older missed slots follow their schedule's misfire policy",
    ),
    Setting("API.RETRY_AFTER", 5, "seconds the Retry-After header of a 503 (Redis unreachable) asks clients to wait"),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
GROUPS: tuple[str, ...] = tuple(dict.fromkeys(s.name.split(".")[0] for s in SETTINGS if "." in s.name))


class MirrorConfig(TypedDict):
    IN_WORKER: bool
    BATCH: int
    BLOCK_MS: int
    SETTLE_MS: int
    PACE_MS: int
    LOCK_TTL: float
    RETENTION_EVERY: float
    RELAY_EVERY: float
    RESTORE: bool


class OutboxConfig(TypedDict):
    RELAY_AFTER: float
    KEEP_PUBLISHED: float


class MetricsConfig(TypedDict):
    ROLLUP_EVERY: float
    SAMPLE_EVERY: float
    KEEP_MINUTES: float
    KEEP_TEN_MINUTES: float
    KEEP_HOURS: float
    MAX_POINTS: int
    ANONYMOUS_LOOPBACK: bool


class HealthConfig(TypedDict):
    WINDOW: float
    WARN_DELAY: float
    ALARM_DELAY: float
    WARN_RETRIES: int
    ALARM_RETRIES: int
    WARN_FAILURE_RATE: float
    ALARM_FAILURE_RATE: float
    MIN_ATTEMPTS: int
    OVERDUE_GRACE: float
    MIRROR_LAG: float
    QUEUES: dict[str, dict[str, float]]
    TASKS: dict[str, dict[str, float]]


class BulkConfig(TypedDict):
    ADMIN_THRESHOLD: int
    CHUNK: int
    PREVIEW_MAX_AGE: float
    CONCURRENCY: int


class ApiConfig(TypedDict):
    ANONYMOUS_SEEDS: bool
    MAX_BODY_BYTES: int
    MAX_BATCH: int
    PAGE_SIZE: int
    MAX_PAGE_SIZE: int
    BULK_THRESHOLD: int
    IDEMPOTENCY_TTL: float
    RETRY_AFTER: int


class PeriodicConfig(TypedDict):
    SCHEDULES: dict[str, dict[str, Any]]
    IN_WORKER: bool
    INTERVAL: float
    MISFIRE_GRACE: float


class Config(TypedDict):
    """What get_config() returns; every key is present. Read it, never change it (it is shared)."""

    REDIS_URL: str
    ENQUEUE_REPLICAS: int
    ENQUEUE_REPLICAS_TIMEOUT: float
    HOST_ID: str
    TASK_MODULES: list[str]
    STRICT_ENQUEUE: bool
    CLIENT_SPIN_US: int
    EVENTS_MAXLEN: int
    WORKER_CONCURRENCY: int
    LOG_LEVEL: str
    IN_TRANSACTION: str
    GROUPS: dict[str, dict[str, Any]]
    QUEUE_LIMITS: dict[str, int]
    WORKER_EXPIRY: float
    SHUTDOWN_GRACE: float
    MIRROR: MirrorConfig
    RETENTION: dict[str, float]
    DB_RETENTION: dict[str, float]
    OUTBOX: OutboxConfig
    METRICS: MetricsConfig
    HEALTH: HealthConfig
    BULK: BulkConfig
    API: ApiConfig
    PERIODIC: PeriodicConfig


def _is_kind(value: object, kind: Kind) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is list:
        return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
    if kind is dict:
        return isinstance(value, Mapping) and all(isinstance(k, str) for k in value)
    return isinstance(value, kind)


def _kind_name(kind: Kind) -> str:
    names = {bool: "a bool", int: "an int", float: "a number", list: "a list of strings", str: "a string"}
    return names.get(kind, "a dict with string keys")


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"{text!r} is not a boolean (1/0, true/false, yes/no, on/off)")


PARSERS: dict[Kind, Callable[[str], Any]] = {
    str: str,
    bool: _parse_bool,
    int: int,
    float: float,
    list: lambda text: [part.strip() for part in text.split(",") if part.strip()],
}


def _coerce(setting: Setting, value: Any) -> Any:
    if setting.type is float:
        return float(value)
    if setting.type is list:
        return list(value)
    if setting.type is dict:  # a copy, two levels deep: the config is shared, never to be changed
        return {k: dict(v) if isinstance(v, Mapping) else v for k, v in value.items()}
    return value


def problems(explicit: object | None = None, environ: Mapping[str, str] | None = None) -> list[tuple[str, str, str]]:
    """Every problem with the settings, as (check id, message, hint): the system check reports them and
    get_config() refuses to run with any. `explicit` defaults to settings.JOBCONSOLE, `environ` to
    os.environ."""
    explicit = getattr(settings, "JOBCONSOLE", {}) if explicit is None else explicit
    environ = os.environ if environ is None else environ
    found: list[tuple[str, str, str]] = []
    if not isinstance(explicit, Mapping):
        return [("E001", f"JOBCONSOLE must be a dict, not {type(explicit).__name__}.", "")]
    flat: dict[str, object] = {}
    for key, value in explicit.items():
        if key in GROUPS:
            if not isinstance(value, Mapping):
                found.append(("E003", f'JOBCONSOLE["{key}"] must be a dict, not {type(value).__name__}.', ""))
                continue
            flat.update({f"{key}.{sub}": v for sub, v in value.items()})
        else:
            flat[str(key)] = value
    for name, value in flat.items():
        setting = BY_NAME.get(name)
        path = "".join(f'["{part}"]' for part in name.split("."))
        if setting is None:
            siblings = [s.name for s in SETTINGS if s.name.rpartition(".")[0] == name.rpartition(".")[0]]
            known = ", ".join(n.rpartition(".")[2] for n in siblings + (list(GROUPS) if "." not in name else []))
            found.append(("E002", f"JOBCONSOLE{path} is not a Jobconsole setting.", f"Known keys here: {known}."))
        elif not _is_kind(value, setting.type):
            found.append((
                "E003", f"JOBCONSOLE{path} must be {_kind_name(setting.type)}, not {type(value).__name__} "
                f"({value!r}).", f"Default: {setting.default!r}.",
            ))  # fmt: skip
        elif setting.check and (wrong := setting.check(value)):
            found.append(("E003", f"JOBCONSOLE{path}: {wrong}.", ""))
    for setting in SETTINGS:
        if setting.env and setting.env in environ and setting.name not in flat:
            try:
                PARSERS[setting.type](environ[setting.env])
            except ValueError as exc:
                found.append(("E004", f"The environment variable {setting.env} is unreadable: {exc}.", ""))
    return found


def resolve(explicit: Mapping[str, Any], environ: Mapping[str, str]) -> Config:
    """The settings with precedence applied: explicit > environment variable > default (no checks)."""
    out: dict[str, Any] = {group: {} for group in GROUPS}
    for setting in SETTINGS:
        group, _, key = setting.name.rpartition(".")
        source = explicit.get(group, {}) if group else explicit
        if key in source:
            value = _coerce(setting, source[key])
        elif setting.env and setting.env in environ:
            value = PARSERS[setting.type](environ[setting.env])
        else:
            value = _coerce(setting, setting.default)
        (out[group] if group else out)[key] = value
    return cast(Config, out)


@cache
def get_config() -> Config:
    """The JOBCONSOLE settings, every key filled in. ImproperlyConfigured when any is wrong."""
    errors = problems()
    if errors:
        listed = "; ".join(f"{message} {hint}".strip() for _, message, hint in errors)
        raise ImproperlyConfigured(f"Jobconsole settings: {listed} (see jobconsole/conf.py)")
    return resolve(getattr(settings, "JOBCONSOLE", {}), os.environ)


def mirror_config() -> MirrorConfig:
    return get_config()["MIRROR"]


def outbox_config() -> OutboxConfig:
    return get_config()["OUTBOX"]


def metrics_config() -> MetricsConfig:
    return get_config()["METRICS"]


def health_config() -> HealthConfig:
    return get_config()["HEALTH"]


def bulk_config() -> BulkConfig:
    return get_config()["BULK"]


def api_config() -> ApiConfig:
    return get_config()["API"]


def periodic_config() -> PeriodicConfig:
    return get_config()["PERIODIC"]


def retention() -> Retention:
    """How long Redis keeps finished jobs, for the engine."""
    return Retention(**get_config()["RETENTION"])


def db_retention() -> dict[str, timedelta]:
    """How long the database keeps finished rows (by state) and audit records ("audit")."""
    return {name: timedelta(seconds=seconds) for name, seconds in get_config()["DB_RETENTION"].items()}


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "JOBCONSOLE":
        get_config.cache_clear()


setting_changed.connect(_settings_changed, dispatch_uid="jobconsole.conf")
