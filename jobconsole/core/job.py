"""Jobs as read back from Redis."""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobconsole.core.errors import UndecodablePayload
from jobconsole.core.payload import decode_checkpoint, decode_params
from jobconsole.core.states import JobState


def ms_to_datetime(value: str | int | None) -> datetime | None:
    if value in (None, ""):
        return None
    return datetime.fromtimestamp(int(value) / 1000, tz=UTC)


def _int(value: str | None, default: int = 0) -> int:
    return int(value) if value not in (None, "") else default


def _json(value: str | None) -> Any:
    return json.loads(value) if value not in (None, "") else None


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
        d = json.loads(raw)
        return cls(
            attempt=int(d.get("attempt", 0)),
            outcome=d.get("outcome", ""),
            worker=d.get("worker", ""),
            host=d.get("host", ""),
            pid=int(d.get("pid", 0)),
            started_at=ms_to_datetime(d.get("started_at")),
            ended_at=ms_to_datetime(d.get("ended_at")),
            error_class=d.get("error_class", ""),
            message=d.get("message", ""),
            traceback=d.get("traceback", ""),
            top_frame=d.get("top_frame", ""),
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
    raw: dict[str, str] = field(default_factory=dict, repr=False)
    # Set when the stored params or checkpoint cannot be decoded (then {} and None; `raw` has the text).
    payload_error: str = ""

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
            progress=float(h["progress"]) if h.get("progress") else None,
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
