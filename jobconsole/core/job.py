"""Jobs as read back from Redis: the one place a job hash and its attempt entries are decoded (`attempt_history`:
a first attempt that succeeded is recorded by the hash's own fields, not an entry).

Readers never fail on a job whose fields were written by other hands: a value that cannot be read is left at
its default (params {} and checkpoint None, with `payload_error` saying why)."""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobconsole.core.errors import UndecodablePayload
from jobconsole.core.payload import decode_checkpoint, decode_params
from jobconsole.core.states import JobState


def ms_to_datetime(value: str | int | None) -> datetime | None:
    """A stored time (Redis ms) as a datetime; None when unset (or not a time)."""
    if not value or value == "0":
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


@dataclass(slots=True)
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


def attempt_history(h: Mapping[str, str], entries: Sequence[str] | None) -> list[Attempt]:
    """A job's attempts from its hash and the entries of its attempt list (None: not read, so none).

    A first attempt that succeeds is not written to the list (complete.lua): the job hash's own fields record it,
    so a completed job with no list has that one attempt, as its entry would have said (ended at finished_at)."""
    if entries:
        return [Attempt.from_json(a) for a in entries]
    if entries is None or h.get("state") != JobState.COMPLETED.value:
        return []
    return [
        Attempt(
            attempt=max(0, _int(h.get("attempts"))),
            outcome="completed",
            worker=h.get("worker", ""),
            host=h.get("host", ""),
            pid=_int(h.get("pid")),
            started_at=ms_to_datetime(h.get("started_at")),
            ended_at=ms_to_datetime(h.get("finished_at")),
        )
    ]


@dataclass(slots=True)
class Job:
    """A job as stored. Its JSON values (params, checkpoint, result, last error) are kept as the stored text and
    decoded when asked for, so a reader that only copies them (the mirror) pays nothing for them."""

    id: str
    task: str
    queue: str
    state: JobState
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
    cancel_requested: bool = False
    reason: str = ""
    lease_ms: int = 30000
    timeout_ms: int = 0
    history: list[Attempt] = field(default_factory=list)
    params_json: str = "{}"
    checkpoint_json: str = ""  # '' = none saved
    result_json: str = ""
    last_error_json: str = ""
    group: str = ""
    raw: dict[str, str] = field(default_factory=dict, repr=False)  # the hash as stored, for an operator to see

    @property
    def params(self) -> dict[str, Any]:
        """The params; {} when the stored text cannot be decoded (`payload_error` says why)."""
        try:
            return decode_params(self.params_json)
        except UndecodablePayload:
            return {}

    @property
    def checkpoint(self) -> Any:
        try:
            return decode_checkpoint(self.checkpoint_json)
        except UndecodablePayload:
            return None

    @property
    def result(self) -> Any:
        return _json(self.result_json)

    @property
    def last_error(self) -> dict[str, Any] | None:
        value = _json(self.last_error_json)
        return value if isinstance(value, dict) else None

    @property
    def payload_error(self) -> str:
        """Why the stored params or checkpoint cannot be decoded (written by other hands); '' when they can."""
        errors: list[str] = []
        for decode, text in ((decode_params, self.params_json), (decode_checkpoint, self.checkpoint_json)):
            try:
                decode(text)
            except UndecodablePayload as exc:
                errors.append(str(exc))
        return "; ".join(errors)

    @property
    def error_class(self) -> str:
        """The exception class of the last failed attempt, '' when none."""
        last_error = self.last_error
        return str(last_error.get("error_class") or "") if last_error else ""

    @classmethod
    def from_hash(cls, h: dict[str, str], history: list[str] | None = None) -> "Job":
        """The job of a hash; `history`: its attempt list's entries (None: not read, the job has no history)."""
        return cls(
            id=h["id"],
            task=h.get("task", ""),
            queue=h.get("queue", ""),
            state=JobState(h.get("state", "queued")),
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
            cancel_requested=h.get("cancel_requested") == "1",
            reason=h.get("reason", ""),
            lease_ms=_int(h.get("lease_ms"), 30000),
            timeout_ms=_int(h.get("timeout_ms")),
            history=attempt_history(h, history),
            params_json=h.get("params") or "{}",
            checkpoint_json=h.get("checkpoint", ""),
            result_json=h.get("result", ""),
            last_error_json=h.get("last_error", ""),
            group=h.get("group", ""),
            raw=h,
        )
