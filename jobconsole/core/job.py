"""Jobs as read back from Redis: the one place a job hash and its attempt entries are decoded.

Readers never fail on a job whose fields were written by other hands: a value that cannot be read is left at
its default (params {} and checkpoint None with `payload_error` saying why)."""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobconsole.core.errors import UndecodablePayload
from jobconsole.core.payload import decode_checkpoint, decode_params
from jobconsole.core.states import JobState


def ms_to_datetime(value: str | int | None) -> datetime | None:
    """A stored time (Redis ms) as a datetime; None when unset (or not a time)."""
    if value in (None, "", "0", 0):
        return None
    try:
        return datetime.fromtimestamp(int(value) / 1000, tz=UTC)
    except (TypeError, ValueError, OverflowError):
        return None


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value) if value not in (None, "") else default
    except (TypeError, ValueError):
        return default


def _json(value: str | None) -> Any:
    """A stored JSON value, or None when unset or not JSON (a hash written by other hands)."""
    if value in (None, ""):
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _decoded[T](decode: Callable[[str], T], text: str, fallback: T, errors: list[str]) -> T:
    """A reader lists a job whose payload was written by other hands instead of failing on it."""
    try:
        return decode(text)
    except UndecodablePayload as exc:
        errors.append(str(exc))
        return fallback


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt's record. Outcomes: completed, failed, timeout, cancelled, shutdown,
    worker_lost, requeued (interrupted without counting), dropped."""

    attempt: int
    outcome: str
    worker: str
    host: str
    pid: int
    started_at: datetime | None
    ended_at: datetime | None
    error_class: str = ""
    message: str = ""
    traceback: str = ""
    top_frame: str = ""

    @classmethod
    def from_json(cls, raw: str) -> "Attempt":
        """One history entry; an entry that is not a JSON object is kept as outcome 'unreadable'."""
        d = _json(raw)
        if not isinstance(d, dict):
            return cls(attempt=0, outcome="unreadable", worker="", host="", pid=0, started_at=None, ended_at=None,
                       message=raw)  # fmt: skip
        return cls(
            attempt=max(0, _int(d.get("attempt"))),
            outcome=str(d.get("outcome", "")),
            worker=str(d.get("worker", "")),
            host=str(d.get("host", "")),
            pid=_int(d.get("pid")),
            started_at=ms_to_datetime(d.get("started_at")),
            ended_at=ms_to_datetime(d.get("ended_at")),
            error_class=str(d.get("error_class", "")),
            message=str(d.get("message", "")),
            traceback=str(d.get("traceback", "")),
            top_frame=str(d.get("top_frame", "")),
        )

    @property
    def duration(self) -> float | None:
        if self.started_at and self.ended_at:
            return (self.ended_at - self.started_at).total_seconds()
        return None


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    task: str
    queue: str
    state: JobState
    params: dict[str, Any]
    priority: int
    attempts: int
    max_retries: int
    version: int = 1
    unique_key: str = ""
    enqueued_at: datetime | None = None
    run_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    heartbeat_at: datetime | None = None
    worker: str = ""
    token: str = ""
    progress: float | None = None
    checkpoint: Any = None
    result: Any = None
    last_error: dict[str, Any] | None = None
    cancel_requested: bool = False
    reason: str = ""
    lease_ms: int = 30000
    timeout_ms: int = 0
    history: list[Attempt] = field(default_factory=list)
    raw: dict[str, str] = field(default_factory=dict, repr=False)  # the hash as stored (the mirror keeps its JSON)
    # Set when the stored params or checkpoint cannot be decoded (then {} and None; `raw` has the text).
    payload_error: str = ""

    @property
    def error_class(self) -> str:
        """The exception class of the last failed attempt, '' when none."""
        return str(self.last_error.get("error_class") or "") if isinstance(self.last_error, dict) else ""

    @classmethod
    def from_hash(cls, h: dict[str, str], history: list[str] | None = None) -> "Job":
        errors: list[str] = []
        params: dict[str, Any] = _decoded(decode_params, h.get("params") or "{}", {}, errors)
        checkpoint: Any = _decoded(decode_checkpoint, h.get("checkpoint") or "", None, errors)
        return cls(
            id=h["id"],
            task=h.get("task", ""),
            queue=h.get("queue", ""),
            state=JobState(h.get("state", "queued")),
            params=params,
            priority=_int(h.get("priority")),
            attempts=_int(h.get("attempts")),
            max_retries=_int(h.get("max_retries")),
            version=_int(h.get("version"), 1),
            unique_key=h.get("unique_key", ""),
            enqueued_at=ms_to_datetime(h.get("enqueued_at")),
            run_at=ms_to_datetime(h.get("run_at") or h.get("enqueued_at")),
            started_at=ms_to_datetime(h.get("started_at")),
            finished_at=ms_to_datetime(h.get("finished_at")),
            heartbeat_at=ms_to_datetime(h.get("heartbeat_at")),
            worker=h.get("worker", ""),
            token=h.get("token", ""),
            progress=_float(h.get("progress")),
            checkpoint=checkpoint,
            result=_json(h.get("result")),
            last_error=_json(h.get("last_error")),
            cancel_requested=h.get("cancel_requested") == "1",
            reason=h.get("reason", ""),
            lease_ms=_int(h.get("lease_ms"), 30000),
            timeout_ms=_int(h.get("timeout_ms")),
            history=[Attempt.from_json(a) for a in history or []],
            raw=h,
            payload_error="; ".join(errors),
        )
