"""Turning what Redis holds (job hashes, attempt entries) into model rows. Pure functions, no I/O."""

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

from jobconsole.models import Attempt, DeadLetter, Job

# Every Job column the mirror writes on an upsert (everything but the primary key).
JOB_FIELDS = [
    "task", "version", "queue", "priority", "state", "params", "result", "attempts", "max_retries",
    "unique_key", "group", "enqueued_at", "run_at", "started_at", "finished_at", "heartbeat_at", "progress",
    "checkpoint", "worker", "error_class", "last_error", "cancel_requested", "reason", "in_redis", "synced_at",
]  # fmt: skip
ATTEMPT_FIELDS = [
    "attempt", "worker", "host", "pid", "started_at", "ended_at", "duration", "outcome", "error_class",
    "message", "traceback", "top_frame",
]  # fmt: skip

_LINE = re.compile(r":\d+ in ")


def ms(value: str | int | float | None) -> datetime | None:
    if value in (None, "", "0", 0):
        return None
    try:
        return datetime.fromtimestamp(int(value) / 1000, tz=UTC)
    except (TypeError, ValueError):
        return None


def stream_time(entry_id: str) -> datetime:
    """The Redis time an event was written (the milliseconds part of its stream id)."""
    return datetime.fromtimestamp(int(entry_id.split("-", 1)[0]) / 1000, tz=UTC)


def _int(value: str | None, default: int = 0) -> int:
    try:
        return int(value) if value not in (None, "") else default
    except ValueError:
        return default


def job_values(h: dict[str, str], synced_at: datetime) -> tuple[Any, ...]:
    """One Job row as values in `["id", *JOB_FIELDS]` order (the mirror writes these with raw SQL)."""
    last_error = h.get("last_error", "")
    error_class = ""
    if last_error:
        try:
            error_class = str(json.loads(last_error).get("error_class") or "")
        except (ValueError, AttributeError):
            error_class = ""
    progress = h.get("progress")
    return (
        h["id"],
        h.get("task", ""),
        _int(h.get("version"), 1),
        h.get("queue", ""),
        _int(h.get("priority")),
        h.get("state", "queued"),
        h.get("params") or "{}",
        h.get("result", ""),
        _int(h.get("attempts")),
        _int(h.get("max_retries")),
        h.get("unique_key", ""),
        h.get("group", ""),
        ms(h.get("enqueued_at")),
        ms(h.get("run_at") or h.get("enqueued_at")),  # unset means "when enqueued"
        ms(h.get("started_at")),
        ms(h.get("finished_at")),
        ms(h.get("heartbeat_at")),
        float(progress) if progress else None,
        h.get("checkpoint", ""),
        h.get("worker", ""),
        error_class[:200],
        last_error,
        h.get("cancel_requested") == "1",
        h.get("reason", ""),
        True,
        synced_at,
    )


def job_row(h: dict[str, str], synced_at: datetime) -> Job:
    return Job(**dict(zip(["id", *JOB_FIELDS], job_values(h, synced_at), strict=True)))


def attempt_values(job_id: str, history: list[str]) -> list[tuple[Any, ...]]:
    """Attempt rows as values in `["job_id", "number", *ATTEMPT_FIELDS]` order."""
    rows = []
    for number, raw in enumerate(history, start=1):
        try:
            d: dict[str, Any] = json.loads(raw)
        except ValueError:
            d = {"outcome": "unreadable", "message": raw}
        started, ended = ms(d.get("started_at")), ms(d.get("ended_at"))
        rows.append(
            (
                job_id,
                number,
                max(0, _int(str(d.get("attempt", 0)))),
                str(d.get("worker", ""))[:200],
                str(d.get("host", ""))[:200],
                _int(str(d.get("pid", 0))),
                started,
                ended,
                (ended - started).total_seconds() if started and ended else None,
                str(d.get("outcome", ""))[:32],
                str(d.get("error_class", ""))[:200],
                str(d.get("message", "")),
                str(d.get("traceback", "")),
                str(d.get("top_frame", ""))[:500],
            )
        )
    return rows


def attempt_rows(job_id: str, history: list[str]) -> list[Attempt]:
    names = ["job_id", "number", *ATTEMPT_FIELDS]
    return [Attempt(**dict(zip(names, values, strict=True))) for values in attempt_values(job_id, history)]


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
