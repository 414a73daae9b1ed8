"""Turning jobs as the engine decodes them (`core.job.Job`, `Attempt`) into model rows. Pure functions, no I/O."""

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from jobconsole.core.job import Attempt as JobAttempt
from jobconsole.core.job import Job, ms_to_datetime
from jobconsole.core.restoring import RELEASE_FIELDS
from jobconsole.core.states import JobState
from jobconsole.models import DeadLetter

# Every Job column the mirror writes on an upsert (everything but the primary key).
JOB_FIELDS = [
    "task", "version", "queue", "priority", "state", "params", "result", "attempts", "max_retries",
    "unique_key", "group", "enqueued_at", "run_at", "started_at", "finished_at", "heartbeat_at", "progress",
    "checkpoint", "worker", "error_class", "last_error", "cancel_requested", "reason", "in_redis", "synced_at",
    "workflow_id", "step", "release_options",
]  # fmt: skip
STATE = 1 + JOB_FIELDS.index("state")  # positions in a job_values() row
FINISHED_AT = 1 + JOB_FIELDS.index("finished_at")
ATTEMPT_FIELDS = [
    "attempt", "worker", "host", "pid", "started_at", "ended_at", "duration", "outcome", "error_class",
    "message", "traceback", "top_frame",
]  # fmt: skip

STATES = frozenset(state.value for state in JobState)
_LINE = re.compile(r":\d+ in ")
NUL, REPLACEMENT = "\x00", "\ufffd"
ESCAPED_NUL = "\\u0000"  # NUL as JSON text writes it: decoded, a JSON value's text may hold NUL

type Time = datetime | str | None
_SECONDS: dict[str, str] = {}  # a Unix second's digits -> its SQLite text (the times of a batch share few seconds)
_SECONDS_MAX = 4096


def sqlite_time(value: datetime) -> str:
    """A UTC datetime as Django stores it in SQLite (naive UTC text: `str()` of the naive value), so lookups
    and ordering keep working."""
    return str(value.replace(tzinfo=None))


def datetime_to_sqlite(value: datetime | None) -> str | None:
    """`sqlite_time` of an aware datetime, or None."""
    return None if value is None else sqlite_time(value if value.tzinfo is UTC else value.astimezone(UTC))


def ms_to_sqlite(value: str | None) -> str | None:
    """`sqlite_time(ms_to_datetime(value))` without the datetime: a stored time (Redis ms) as SQLite's text; None
    when unset (or not a time). The mirror's SQLite hot path (tests/app/test_mirror_rows.py holds the two equal)."""
    if not value or value == "0":
        return None
    if len(value) > 3 and value.isascii() and value.isdigit():
        # The usual case, a plain count of milliseconds: its seconds' digits name the cached text.
        seconds, ms = value[:-3], value[-3:]
        text = _SECONDS.get(seconds)
        if text is None:
            text = _second(int(seconds))
            if text is None:
                return None
            if len(_SECONDS) >= _SECONDS_MAX:
                _SECONDS.clear()
            _SECONDS[seconds] = text
    else:
        try:
            whole, part = divmod(int(value), 1000)
        except (TypeError, ValueError):
            return None
        text, ms = _second(whole), f"{part:03d}"
        if text is None:
            return None
    # str() of a datetime writes microseconds only when there are some.
    return text if ms == "000" else f"{text}.{ms}000"


def _second(seconds: int) -> str | None:
    try:
        return str(datetime.fromtimestamp(seconds, tz=UTC).replace(tzinfo=None))
    except (ValueError, OverflowError, OSError):
        return None


def db_text(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """The row with NUL in its text replaced by U+FFFD: PostgreSQL's text columns cannot hold NUL, and one task's
    error message (or an operator's reason) with one would otherwise fail every batch that carries its job."""
    if not any(type(v) is str and NUL in v for v in row):
        return row
    return tuple(v.replace(NUL, REPLACEMENT) if type(v) is str else v for v in row)


def job_values(job: Job, synced_at: datetime) -> tuple[Any, ...]:
    """One Job row as values in `["id", *JOB_FIELDS]` order (the mirror writes these with raw SQL). The JSON
    columns keep the text Redis stores."""
    return db_text(
        (
            job.id,
            job.task,
            job.version,
            job.queue,
            job.priority,
            job.state.value,
            job.params_json,
            job.result_json,
            job.attempts,
            job.max_retries,
            job.unique_key,
            job.group,
            job.enqueued_at,
            job.run_at,
            job.started_at,
            job.finished_at,
            job.heartbeat_at,
            job.progress,
            job.checkpoint_json,
            job.worker,
            job.error_class[:200],
            job.last_error_json,
            job.cancel_requested,
            job.reason,
            True,
            synced_at,
            job.raw.get("workflow", "")[:26],
            job.raw.get("step", "")[:200],
            release_options(job.raw),
        )
    )


def hash_values(
    h: dict[str, str], synced_at: Time, time: Callable[[str | None], Time] = ms_to_datetime
) -> tuple[Any, ...]:
    """`job_values(Job.from_hash(h), synced_at)` read straight off the stored hash: the mirror's hot path, which
    needs no Job object. tests/app/test_mirror_rows.py holds the two equal on every kind of hash.

    `time` converts the stored times: `ms_to_sqlite` gives the text SQLite stores (with `synced_at` as that
    text), which the writer passes through as it is."""
    get = h.get
    last_error = get("last_error", "")
    progress = get("progress")
    try:
        progress_value = float(progress) if progress else None
    except ValueError:
        progress_value = None
    row = (
        h["id"],
        get("task", ""),
        _int(get("version"), 1),
        get("queue", ""),
        _int(get("priority")),
        state if (state := get("state", "queued")) in STATES else JobState(state).value,  # (raises ValueError)
        get("params") or "{}",
        get("result", ""),
        _int(get("attempts")),
        _int(get("max_retries")),
        get("unique_key", ""),
        get("group", ""),
        time(get("enqueued_at")),
        time(get("run_at") or get("enqueued_at")),
        time(get("started_at")),
        time(get("finished_at")),
        time(get("heartbeat_at")),
        progress_value,
        get("checkpoint", ""),
        get("worker", ""),
        _error_class(last_error)[:200] if last_error else "",
        last_error,
        get("cancel_requested") == "1",
        get("reason", ""),
        True,
        synced_at,
        get("workflow", "")[:26],
        get("step", "")[:200],
        release_options(h),
    )
    # Every text of the row comes from the hash's values, as they are or decoded from JSON (the error class):
    # one search of them all, instead of one per column, says whether there may be a NUL to replace.
    text = "".join(h.values())
    return db_text(row) if NUL in text or ESCAPED_NUL in text else row


def release_options(h: dict[str, str]) -> str:
    """A job with parents: the fields of its hash that say how it is released (core/restoring.py), as JSON, so
    that a restore can put it back waiting as it was; '' for every other job."""
    if "deps_n" not in h:
        return ""
    return json.dumps({name: h[name] for name in RELEASE_FIELDS if h.get(name)}, separators=(",", ":"))


def _int(value: str | None, default: int = 0) -> int:
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        return default


def _error_class(last_error: str) -> str:
    try:
        value = json.loads(last_error)
    except ValueError:
        return ""
    return str(value.get("error_class") or "") if isinstance(value, dict) else ""


def attempt_values(
    job_id: str, history: Sequence[JobAttempt], time: Callable[[datetime | None], Time] | None = None
) -> list[tuple[Any, ...]]:
    """Attempt rows as values in `["job_id", "number", *ATTEMPT_FIELDS]` order. `time`: converts the start and end
    (`datetime_to_sqlite`: the text SQLite stores)."""
    out: list[tuple[Any, ...]] = []
    for number, a in enumerate(history, start=1):
        row = (
            job_id,
            number,
            a.attempt,
            a.worker[:200],
            a.host[:200],
            a.pid,
            time(a.started_at) if time else a.started_at,
            time(a.ended_at) if time else a.ended_at,
            a.duration,
            a.outcome[:32],
            a.error_class[:200],
            a.message,
            a.traceback,
            a.top_frame[:500],
        )
        # One search of every text of the row, instead of one per column.
        text = job_id + a.worker + a.host + a.outcome + a.error_class + a.message + a.traceback + a.top_frame
        out.append(db_text(row) if NUL in text else row)
    return out


def completed_attempt_values(
    job_id: str, h: dict[str, str], time: Callable[[str | None], Time] = ms_to_datetime
) -> list[tuple[Any, ...]]:
    """`attempt_values(job_id, attempt_history(h, []), ...)` of a completed job whose attempt list is empty (its
    first attempt succeeded: the hash records it), read straight off the hash like `hash_values`: the mirror's hot
    path. `time` as for `hash_values`. tests/app/test_mirror_rows.py holds the two equal."""
    get = h.get
    started, ended = get("started_at"), get("finished_at")
    started_at, ended_at = time(started), time(ended)
    duration = (int(ended) - int(started)) / 1000 if started_at is not None and ended_at is not None else None  # type: ignore[arg-type]
    worker, host = get("worker", ""), get("host", "")
    row = (
        job_id, 1, max(0, _int(get("attempts"))), worker[:200], host[:200], _int(get("pid")), started_at, ended_at,
        duration, "completed", "", "", "", "",
    )  # fmt: skip
    return [db_text(row) if NUL in job_id + worker + host else row]


def fingerprint(error_class: str, top_frame: str) -> str:
    """Groups dead letters by cause: the exception class plus the top frame of the user's code, without
    its line number (so an unrelated edit above the raising line does not split a group)."""
    frame = _LINE.sub(" in ", top_frame)
    return hashlib.sha1(f"{error_class}|{frame}".encode()).hexdigest()[:16]


def dead_letter_row(job: tuple[Any, ...], last_attempt: tuple[Any, ...] | None) -> DeadLetter | None:
    """The dead-letter record of a dead job (values from `job_values`, `attempt_values`)."""
    j = dict(zip(["id", *JOB_FIELDS], job, strict=True))
    if j["finished_at"] is None:
        return None
    a = dict(zip(["job_id", "number", *ATTEMPT_FIELDS], last_attempt, strict=True)) if last_attempt else {}
    error_class = a.get("error_class") or j["error_class"]
    message = a.get("message", "")
    if not message and j["last_error"]:
        try:
            message = str(json.loads(j["last_error"]).get("message") or "")
        except (ValueError, AttributeError):
            message = ""
    top_frame = a.get("top_frame", "")
    return DeadLetter(
        job_id=j["id"],
        queue=j["queue"],
        task=j["task"],
        version=j["version"],
        died_at=j["finished_at"],
        attempts=j["attempts"],
        error_class=error_class,
        message=message,
        top_frame=top_frame,
        fingerprint=fingerprint(error_class, top_frame),
    )
