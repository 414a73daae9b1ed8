"""Workers: the registry of running workers, with what each runs."""

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from jobconsole.core import keys
from jobconsole.core.job import ms_to_datetime
from jobconsole.core.queries.base import Reader


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    active_threads: int
    # 'running', 'quiet' or 'stopping'; 'gone' when it stopped heartbeating (core/lapse.py) or its hash expired
    state: str
    started_at: datetime | None
    heartbeat_at: datetime | None
    processed: int
    failed: int
    current: list[dict[str, Any]] = field(default_factory=list)  # the jobs it runs: id, queue, task, attempt
    gone_at: datetime | None = None  # when a recoverer declared it gone (None: live, or its record expired)
    gone_reason: str = ""  # why, in words: "no heartbeat for 3.2 s (deadline passed 0.2 s ago)"
    jobs_taken_back: int = 0  # its running jobs the recoverer took back then
    control: str = ""  # an operator's 'quiet' or 'stop' not necessarily acted on yet (worker_control.lua)


class Workers(Reader):
    def all(self) -> list[WorkerInfo]:
        """Every registered worker, most recent heartbeat first; one whose hash expired is listed as 'gone'."""
        entries = cast(list[tuple[str, float]], self.redis.zrange(keys.WORKERS, 0, -1, desc=True, withscores=True))
        pipe = self.redis.pipeline(transaction=False)
        for worker_id, _ in entries:
            pipe.hgetall(keys.worker_key(worker_id))
        out: list[WorkerInfo] = []
        for (worker_id, beat), h in zip(entries, pipe.execute(), strict=True):
            current = _json_list(h.get("current"))
            out.append(
                WorkerInfo(
                    id=worker_id, host=h.get("host", ""), pid=_int(h.get("pid")),
                    queues=[q for q in h.get("queues", "").split(",") if q], concurrency=_int(h.get("concurrency")),
                    active_threads=_int(h.get("active_threads")), state=h.get("state", "gone") if h else "gone",
                    started_at=ms_to_datetime(h.get("started_at")),
                    heartbeat_at=ms_to_datetime(max(_int(h.get("heartbeat_at")), int(beat))),
                    processed=_int(h.get("processed")), failed=_int(h.get("failed")),
                    current=[] if h.get("state") == "gone" else current,  # taken back: it runs nothing now
                    gone_at=ms_to_datetime(h.get("gone_at")), gone_reason=h.get("gone_reason", ""),
                    jobs_taken_back=_int(h.get("jobs_taken_back")), control=h.get("control", ""),
                )
            )  # fmt: skip
        return out

    def count(self) -> int:
        return int(self.redis.zcard(keys.WORKERS))


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _json_list(text: str | None) -> list[dict[str, Any]]:
    try:
        value = json.loads(text or "[]")
    except ValueError:
        return []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
