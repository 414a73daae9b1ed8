"""The engine's read API: what the console, the admin, the mirror and the cleaner (and the HTTP API to come) read.

Readers ask in nouns (queues and their counts, jobs of a state a page at a time, the worker registry,
per-minute statistics, events) and never name a key. A job a fast enqueue accepted may still be an intake
entry, so every read of a queue's jobs drains its intake first (`Store.drain`).
"""

import base64
import json
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any, Literal, cast

import redis

from jobconsole.core import keys, metrics, redis_health, scripts
from jobconsole.core.errors import InvalidJob, JobNotFound
from jobconsole.core.job import Attempt, Job, ms_to_datetime
from jobconsole.core.keys import QueueKeys, queue_keys
from jobconsole.core.states import JobState
from jobconsole.core.store import Store

PAGE_MAX = 1000


@dataclass(frozen=True, slots=True)
class QueueCounts:
    queue: str
    paused: bool
    queued: int
    scheduled: int  # delayed jobs and retries waiting for their backoff
    running: int
    completed: int
    failed: int
    dead: int
    dropped: int
    cancelled: int


@dataclass(frozen=True, slots=True)
class JobPage:
    jobs: list[Job]
    next_cursor: str | None  # pass back for the next page; None on the last one


@dataclass(frozen=True, slots=True)
class TimedJob:
    """A job of a set scored by time, with its score: the run-at of a delayed or retrying job, the lease
    deadline of a running one."""

    job: Job
    at: datetime


@dataclass(frozen=True, slots=True)
class TimedPage:
    jobs: list[TimedJob]
    next_cursor: str | None  # pass back for the next page; None on the last one


# A set scored by time in every queue, and the job states it holds: "scheduled" (run-at: delayed jobs and
# retries waiting for their backoff) or "running" (lease deadline).
type TimedSet = Literal["scheduled", "running"]
_TIMED_STATES: dict[str, frozenset[JobState]] = {
    "scheduled": frozenset({JobState.SCHEDULED, JobState.RETRYING}),
    "running": frozenset({JobState.RUNNING}),
}

# An entry of a timed set across queues, in the order pages list them: (score, queue, member).
type _Entry = tuple[float, str, str]


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    active_threads: int
    state: str  # 'running', 'quiet' or 'stopping'; 'gone' when its registry hash expired (it died)
    started_at: datetime | None
    heartbeat_at: datetime | None
    processed: int
    failed: int
    current: list[dict[str, Any]] = field(default_factory=list)  # the jobs it runs: id, queue, task, attempt
    control: str = ""  # an operator's 'quiet' or 'stop' not necessarily acted on yet (worker_control.lua)


@dataclass(frozen=True, slots=True)
class MinuteStat:
    minute: datetime
    metric: str  # a name of core/metrics.py: enqueued, ..., runtime_ms, wait_h:<i>, done_h:<i>, fail_h:<i>, retry_max
    task: str
    value: int


@dataclass(frozen=True, slots=True)
class QueueGauges:
    """A queue's gauges at one instant, read without scanning a job (gauges.lua)."""

    queue: str
    at: datetime  # Redis's time of the reading
    paused: bool
    queued: int  # ready to run (the intake's entries included)
    scheduled: int  # delayed jobs and retries waiting for their backoff
    running: int
    dead: int
    oldest_waiting_since: datetime | None  # when the longest-waiting ready job became ready; None: none waits
    overdue: int  # running jobs whose lease deadline is more than the grace asked for behind

    @property
    def oldest_wait(self) -> float | None:
        """Seconds the longest-waiting ready job has waited, or None."""
        if self.oldest_waiting_since is None:
            return None
        return max((self.at - self.oldest_waiting_since).total_seconds(), 0.0)


@dataclass(frozen=True, slots=True)
class Event:
    """One state change as the queue's events stream recorded it."""

    queue: str
    id: str  # stream entry id; its milliseconds are the Redis time of the change
    fields: dict[str, str]

    @property
    def job(self) -> str:
        return self.fields.get("job", "")

    @property
    def name(self) -> str:
        return self.fields.get("event", "")

    @property
    def at(self) -> datetime:
        return stream_time(self.id)


def stream_time(entry_id: str) -> datetime:
    """The Redis time an event was written (the milliseconds part of its stream id)."""
    return datetime.fromtimestamp(int(entry_id.split("-", 1)[0]) / 1000, tz=UTC)


def _state_key(k: QueueKeys, state: JobState) -> str:
    if state is JobState.QUEUED:
        return k.ready
    if state in (JobState.SCHEDULED, JobState.RETRYING):
        return k.scheduled
    if state is JobState.RUNNING:
        return k.active
    return k.terminal_sets[state.value]


def _encode_cursor(score: float, member: str) -> str:
    return base64.urlsafe_b64encode(f"{score!r}|{member}".encode()).decode()


def _decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        score, _, member = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return float(score), member
    except (ValueError, UnicodeDecodeError):
        raise InvalidJob(f"invalid cursor {cursor!r}") from None


# A timed page's cursor is the position of its last entry, readable and checkable by a pattern: its time (ms
# since the epoch), queue and job id. Any string of this shape is a position to go on from.
TIMED_CURSOR_PATTERN = "^[0-9]{1,16}(\\.[0-9]{1,6})?~[A-Za-z0-9_.\\-]{1,100}~[0-9A-Z]{26}$"


def _encode_timed_cursor(entry: _Entry) -> str:
    score, queue, member = entry
    shown = f"{score:.6f}".rstrip("0").rstrip(".")
    return f"{shown}~{queue}~{member}"


def _decode_timed_cursor(cursor: str) -> _Entry:
    if not re.fullmatch(TIMED_CURSOR_PATTERN, cursor):
        raise InvalidJob(f"invalid cursor {cursor!r}")
    score, queue, member = cursor.split("~")
    return float(score), queue, member


@dataclass(frozen=True, slots=True)
class GroupState:
    """A concurrency group now: its limits, the slots held (leases not run out), the starts in the current rate
    window, and its jobs waiting for a slot, per queue."""

    name: str
    connections: int  # 0: no cap
    requests: int  # 0: no rate limit
    period_ms: int
    in_use: int
    started_in_window: int
    held: dict[str, int]  # queue -> jobs waiting for a slot there
    waiting_queues: list[str]  # queues whose workers came short of a slot since the last release

    @property
    def waiting(self) -> int:
        return sum(self.held.values())


@dataclass(frozen=True, slots=True)
class FlowControl:
    groups: list[GroupState]
    queue_limits: dict[str, int]  # queue -> most jobs running at once (queues with a limit only)
    running: dict[str, int]  # queue -> jobs running now (the limited queues)


class Queries:
    """Reads for operators and programs. Thread-safe (redis-py's pool)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.redis = store.redis

    # --- queues -----------------------------------------------------------------------------------

    def _drain(self, queue: str) -> None:
        """Turn the queue's intake into jobs before a read, unless Redis refuses writes (full, unable to persist,
        a replica, too few replicas): the read then goes on without the intake's newest jobs, so that the console
        shows what Redis holds and why it refuses writes (jobconsole/service_health.py) instead of failing."""
        try:
            self.store.drain(queue)
        except redis.ResponseError as exc:
            if redis_health.refusal_kind(exc) == redis_health.OTHER:
                raise

    def queues(self) -> list[str]:
        """Every queue a job or a worker has used, by name."""
        return sorted(cast(set[str], self.redis.smembers(keys.QUEUES)))

    def counts(self, queue: str) -> QueueCounts:
        self._drain(queue)
        k = queue_keys(queue)
        pipe = self.redis.pipeline(transaction=False)
        pipe.exists(k.paused)
        for key in (k.ready, k.scheduled, k.active, k.completed, k.failed, k.dead, k.dropped, k.cancelled):
            pipe.zcard(key)
        pipe.smembers(k.groups)
        paused, *n, groups = pipe.execute()
        if groups:  # jobs held for a concurrency group's slot are queued too
            pipe = self.redis.pipeline(transaction=False)
            for group in groups:
                pipe.zcard(k.held(group))
            n[0] += sum(pipe.execute())
        return QueueCounts(queue, bool(paused), *n)

    def flow_control(self) -> FlowControl:
        """Every concurrency group and queue limit, as they stand (two pipelined round trips)."""
        now = self.store.time_ms()
        queues = self.queues()
        groups = sorted(cast(set[str], self.redis.smembers(keys.GROUPS)))
        pipe = self.redis.pipeline(transaction=False)
        for queue in queues:
            pipe.get(queue_keys(queue).limit)
            pipe.smembers(queue_keys(queue).groups)
        for group in groups:
            g = keys.group_keys(group)
            pipe.hgetall(g.conf)
            pipe.zcount(g.slots, now, "+inf")
            pipe.smembers(g.waiting)
        replies = pipe.execute()
        limits = {q: int(replies[2 * i]) for i, q in enumerate(queues) if replies[2 * i]}
        held_in = {q: sorted(replies[2 * i + 1]) for i, q in enumerate(queues) if replies[2 * i + 1]}
        pipe = self.redis.pipeline(transaction=False)
        for queue, names in held_in.items():
            for group in names:
                pipe.zcard(queue_keys(queue).held(group))
        for group in groups:
            conf = replies[2 * len(queues) + 3 * groups.index(group)]
            period = int(conf.get("period_ms") or 1000)
            pipe.zcount(keys.group_keys(group).starts, now - period, "+inf")
        for queue in limits:
            pipe.zcard(queue_keys(queue).active)
        counts = iter(pipe.execute())
        held: dict[str, dict[str, int]] = {}
        for queue, names in held_in.items():
            for group in names:
                held.setdefault(group, {})[queue] = int(next(counts))
        states = []
        for n, group in enumerate(groups):
            conf, in_use, waiting = replies[2 * len(queues) + 3 * n : 2 * len(queues) + 3 * n + 3]
            state = GroupState(
                group, int(conf.get("connections") or 0), int(conf.get("requests") or 0),
                int(conf.get("period_ms") or 1000), int(in_use), int(next(counts)), held.get(group, {}),
                sorted(waiting),
            )  # fmt: skip
            states.append(state)
        running = {queue: int(next(counts)) for queue in limits}
        return FlowControl(states, limits, running)

    def is_paused(self, queue: str) -> bool:
        return bool(self.redis.exists(queue_keys(queue).paused))

    # --- jobs -------------------------------------------------------------------------------------

    def locate(self, job_id: str) -> str:
        """The queue holding a job (ids are unique across queues in practice; the first match wins)."""
        queues = self.queues()
        for attempt in range(2):
            pipe = self.redis.pipeline(transaction=False)
            for q in queues:
                pipe.exists(queue_keys(q).job(job_id))
            for q, exists in zip(queues, pipe.execute(), strict=True):
                if exists:
                    return q
            if attempt == 0:
                # Look again even when these drains found nothing: another client or a worker may have drained
                # the job's intake entry between the look above and now.
                for q in queues:
                    self._drain(q)
        raise JobNotFound(f"no job {job_id}")

    def job(self, job_id: str, queue: str | None = None, *, history: bool = True) -> Job:
        queue = queue or self.locate(job_id)
        for attempt in range(2):
            [found] = self.jobs_by_id([(queue, job_id)], history=history)
            if found is not None:
                return found
            if attempt == 0:
                self._drain(queue)  # look again even if this drain found nothing (see locate)
        raise JobNotFound(f"no job {job_id}")

    def jobs_by_id(self, jobs: Sequence[tuple[str, str]], *, history: bool | set[str] = False) -> list[Job | None]:
        """(queue, id) pairs read in one round trip; None where the job is gone. `history`: read the attempts
        of every job, or of the ids in the set."""
        pipe = self.redis.pipeline(transaction=False)
        wanted: list[bool] = []
        for queue, job_id in jobs:
            k = queue_keys(queue)
            pipe.hgetall(k.job(job_id))
            with_history = history if isinstance(history, bool) else job_id in history
            if with_history:
                pipe.lrange(k.attempts(job_id), 0, -1)
            wanted.append(with_history)
        replies = iter(pipe.execute())
        out: list[Job | None] = []
        for with_history in wanted:
            h = next(replies)
            attempts = next(replies) if with_history else None
            out.append(Job.from_hash(h, attempts) if h else None)
        return out

    def job_hashes(
        self, jobs: Sequence[tuple[str, str]], *, history: set[str]
    ) -> list[tuple[dict[str, str], list[str] | None]]:
        """The raw hash (empty when the job is gone) of (queue, id) pairs, with the raw attempt entries of the
        ids in `history`, in one round trip: the mirror's read, which decodes only what it writes."""
        calls: list[list[str]] = []
        for queue, job_id in jobs:
            k = queue_keys(queue)
            calls.append(["HGETALL", k.job(job_id)])
            if job_id in history:
                calls.append(["LRANGE", k.attempts(job_id), "0", "-1"])
        replies = iter(scripts.commands(self.redis, calls))
        out: list[tuple[dict[str, str], list[str] | None]] = []
        for _, job_id in jobs:
            h = next(replies)
            if isinstance(h, Exception):
                raise h
            if isinstance(h, list):  # RESP2: field, value, field, value...
                it = iter(h)
                h = dict(zip(it, it, strict=True))
            entries = next(replies) if job_id in history else None
            if isinstance(entries, Exception):
                raise entries
            out.append((h, entries))
        return out

    def raw_histories(self, jobs: Sequence[tuple[str, str]]) -> list[list[str]]:
        """The raw attempt entries of (queue, id) pairs, in one round trip (the mirror decodes what it writes)."""
        replies = scripts.commands(self.redis, [["LRANGE", queue_keys(q).attempts(i), "0", "-1"] for q, i in jobs])
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies

    def histories(self, jobs: Sequence[tuple[str, str]]) -> list[list[Attempt]]:
        """The attempts of (queue, id) pairs (for jobs read without them), in one round trip."""
        pipe = self.redis.pipeline(transaction=False)
        for queue, job_id in jobs:
            pipe.lrange(queue_keys(queue).attempts(job_id), 0, -1)
        return [[Attempt.from_json(a) for a in entries] for entries in pipe.execute()]

    def job_ids(self, queue: str, state: JobState, limit: int = 100) -> list[str]:
        """Ids in one state's set, oldest first (running: by lease deadline; queued: in claim order). Scheduled
        and retrying jobs share a set: either lists both."""
        self._drain(queue)
        return cast(list[str], self.redis.zrange(_state_key(queue_keys(queue), state), 0, limit - 1))

    def ids(self, queue: str, states: Sequence[JobState] | None = None) -> list[str]:
        """Every id in the given states' sets (default: every set), each once."""
        self._drain(queue)
        k = queue_keys(queue)
        chosen = states or list(JobState)
        pipe = self.redis.pipeline(transaction=False)
        for key in dict.fromkeys(_state_key(k, s) for s in chosen):
            pipe.zrange(key, 0, -1)
        return list(dict.fromkeys(i for members in pipe.execute() for i in members))

    def iter_jobs(self, queue: str, states: Sequence[JobState] | None = None, *, chunk: int = 1000) -> Iterator[Job]:
        """Every job of the queue whose hash says it is in one of `states` (default: any), without history,
        read `chunk` at a time. Every set is looked at, so a job whose hash and set disagree is found too."""
        ids = self.ids(queue)
        for start in range(0, len(ids), chunk):
            for job in self.jobs_by_id([(queue, i) for i in ids[start : start + chunk]]):
                if job is not None and (states is None or job.state in states):
                    yield job

    def jobs(
        self,
        queue: str,
        state: JobState,
        *,
        cursor: str | None = None,
        limit: int = 50,
        newest_first: bool | None = None,
    ) -> JobPage:
        """A page of the jobs in one state. Waiting and running jobs come oldest first (in the order workers
        take them), finished ones newest first, unless `newest_first` says otherwise. The cursor stays valid
        while jobs come and go: a page starts after the last job of the one before."""
        if not 1 <= limit <= PAGE_MAX:
            raise InvalidJob(f"limit must be from 1 to {PAGE_MAX}; got {limit}")
        self._drain(queue)
        k = queue_keys(queue)
        sets = [_state_key(k, state)]
        if state is JobState.QUEUED:  # and the jobs held for a concurrency group's slot, scored alike
            sets += [k.held(group) for group in sorted(cast(set[str], self.redis.smembers(k.groups)))]
        desc = state.is_terminal if newest_first is None else newest_first
        after = _decode_cursor(cursor) if cursor else None
        found: list[Job] = []
        last: tuple[float, str] | None = None
        offset = 0
        while True:
            fetch = limit + 1 - len(found)
            batch = self._range_after_in(sets, after, desc, offset, fetch)
            if not batch:
                return JobPage(found, None)
            fresh = [
                (m, s) for m, s in batch
                if after is None or s != after[0] or (m < after[1] if desc else m > after[1])
            ]  # fmt: skip
            offset = offset + len(batch) if not fresh else 0  # only ties of the cursor's score: look further
            for (member, score), job in zip(fresh, self.jobs_by_id([(queue, m) for m, _ in fresh]), strict=True):
                if job is None or job.state is not state:
                    continue  # gone, or the other state of a shared set
                if len(found) == limit:
                    assert last is not None
                    return JobPage(found, _encode_cursor(*last))
                found.append(job)
                last = (score, member)
            if fresh:
                after = (fresh[-1][1], fresh[-1][0])
            if len(batch) < fetch:
                return JobPage(found, None)

    def _range_after_in(
        self, keys_: list[str], after: tuple[float, str] | None, desc: bool, offset: int, count: int
    ) -> list[tuple[str, float]]:
        """`_range_after` over several sets, merged by score (the ready set and its held sets)."""
        if len(keys_) == 1:
            return self._range_after(keys_[0], after, desc, offset, count)
        merged = [item for key in keys_ for item in self._range_after(key, after, desc, offset, count)]
        merged.sort(key=lambda item: (item[1], item[0]), reverse=desc)
        return merged[:count]

    def _range_after(
        self, key: str, after: tuple[float, str] | None, desc: bool, offset: int, count: int
    ) -> list[tuple[str, float]]:
        if after is None:
            low: str = "-inf"
            high: str = "+inf"
        elif desc:
            low, high = "-inf", repr(after[0])
        else:
            low, high = repr(after[0]), "+inf"
        start, end = (high, low) if desc else (low, high)
        return cast(
            list[tuple[str, float]],
            self.redis.zrange(key, start, end, desc=desc, byscore=True, offset=offset, num=count, withscores=True),
        )

    # --- across queues: the sets scored by time -----------------------------------------------------

    def timed_jobs(
        self, kind: TimedSet, queues: Sequence[str] | None = None, *, cursor: str | None = None, limit: int = 50
    ) -> TimedPage:
        """A page of every queue's delayed and retrying jobs, soonest due first (kind "scheduled"), or of its
        running jobs, earliest lease deadline first ("running"), each with that time. The queues' sets are
        merged in (time, queue, id) order; the cursor stays valid while jobs come and go."""
        if not 1 <= limit <= PAGE_MAX:
            raise InvalidJob(f"limit must be from 1 to {PAGE_MAX}; got {limit}")
        names = self.queues() if queues is None else list(queues)
        if kind == "running":
            for reply in self.store.run_many([self.store.drain_call(q) for q in names]):
                if isinstance(reply, Exception):  # a handed job may still be an intake entry
                    raise reply
        states = _TIMED_STATES[kind]
        after = _decode_timed_cursor(cursor) if cursor else None
        found: list[TimedJob] = []
        last: _Entry | None = None
        while True:
            need = limit + 1 - len(found)
            available = self._entries_after(kind, names, after, need)
            batch = available[:need]
            if not batch:
                return TimedPage(found, None)
            for entry, job in zip(batch, self.jobs_by_id([(q, m) for _, q, m in batch]), strict=True):
                if job is None or job.state not in states:
                    continue  # gone meanwhile, or a hash that disagrees with its set
                if len(found) == limit:
                    assert last is not None
                    return TimedPage(found, _encode_timed_cursor(last))
                found.append(TimedJob(job, datetime.fromtimestamp(entry[0] / 1000, tz=UTC)))
                last = entry
            if len(available) < need:
                return TimedPage(found, None)
            after = batch[-1]

    def _entries_after(self, kind: TimedSet, queues: Sequence[str], after: _Entry | None, count: int) -> list[_Entry]:
        """The first `count` entries after `after` of the queues' timed sets, merged in order. One round trip
        unless many entries share the cursor's time."""

        def key(queue: str) -> str:
            k = queue_keys(queue)
            return k.scheduled if kind == "scheduled" else k.active

        low = "-inf" if after is None else repr(after[0])
        pipe = self.redis.pipeline(transaction=False)
        for queue in queues:
            pipe.zrange(key(queue), low, "+inf", byscore=True, offset=0, num=count, withscores=True)
        out: list[_Entry] = []
        for queue, rows in zip(queues, pipe.execute(), strict=True):
            fresh = [(s, queue, m) for m, s in rows if after is None or (s, queue, m) > after]
            offset = len(rows)
            # Entries at the cursor's own time that come before it were skipped: read on past them.
            while len(fresh) < count and len(rows) == count:
                rows = cast(
                    list[tuple[str, float]],
                    self.redis.zrange(key(queue), low, "+inf", byscore=True, offset=offset, num=count, withscores=True),
                )
                fresh += [(s, queue, m) for m, s in rows if after is None or (s, queue, m) > after]
                offset += len(rows)
            out += fresh[:count]
        out.sort()
        return out[:count]

    def lease_deadlines(self, jobs: Sequence[tuple[str, str]]) -> list[datetime | None]:
        """When the leases of (queue, id) pairs run out, in one round trip; None where the job is not running."""
        pipe = self.redis.pipeline(transaction=False)
        for queue, job_id in jobs:
            pipe.zscore(queue_keys(queue).active, job_id)
        return [None if s is None else datetime.fromtimestamp(s / 1000, tz=UTC) for s in pipe.execute()]

    def due_counts(self, bounds: Sequence[datetime], queues: Sequence[str] | None = None) -> list[int]:
        """How many delayed and retrying jobs fall due in each interval [bounds[i], bounds[i + 1]), summed over
        the queues (default every queue): len(bounds) - 1 counts, one ZCOUNT per interval and queue, all in
        one round trip. Never reads a job."""
        names = self.queues() if queues is None else list(queues)
        edges = [int(b.timestamp() * 1000) for b in bounds]
        pipe = self.redis.pipeline(transaction=False)
        for queue in names:
            scheduled = queue_keys(queue).scheduled
            for low, high in pairwise(edges):
                pipe.zcount(scheduled, low, f"({high}")
        replies = cast(list[int], pipe.execute())
        width = max(0, len(edges) - 1)
        return [sum(replies[q * width + i] for q in range(len(names))) for i in range(width)]

    def now(self) -> datetime:
        """Redis's clock, in which every lease deadline and run-at is counted."""
        return datetime.fromtimestamp(self.store.time_ms() / 1000, tz=UTC)

    # --- workers, statistics, events --------------------------------------------------------------

    def workers(self) -> list[WorkerInfo]:
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
                    heartbeat_at=ms_to_datetime(h.get("heartbeat_at") or int(beat)),
                    processed=_int(h.get("processed")), failed=_int(h.get("failed")), current=current,
                    control=h.get("control", ""),
                )
            )  # fmt: skip
        return out

    def worker_count(self) -> int:
        return int(self.redis.zcard(keys.WORKERS))

    def stats(self, queue: str, since: datetime | None = None) -> list[MinuteStat]:
        """The queue's per-minute counters (kept for a day), oldest first; `since` bounds them. It reads the whole
        day's hash: for a few minutes, `minute_values` (known tasks) or `minute_counts` cost less."""
        first = int(since.timestamp()) // 60 if since else 0
        out: list[MinuteStat] = []
        for name, value in cast(dict[str, str], self.redis.hgetall(queue_keys(queue).stats)).items():
            minute, metric, task = [*name.split("|", 2), "", ""][:3]
            if not minute.isdigit() or int(minute) < first:
                continue
            out.append(MinuteStat(_minute_time(int(minute)), metric, task, int(value)))
        out = with_totals(out)
        out.sort(key=lambda s: (s.minute, s.metric, s.task))
        return out

    def minute_counts(self, queue: str, first: int, last: int) -> list[MinuteStat]:
        """The queue's counters of the minutes `first` to `last` (Unix minutes, both included), in no order.

        The hash holds a day of minutes and has no index by minute, so this walks it with HSCAN (Redis serves
        others between the steps) and lets Redis skip the fields outside the minutes' longest common prefix."""
        if first > last:
            return []
        low, high = str(first), str(last)
        prefix = ""
        while len(low) == len(high) and len(prefix) < len(low) and low[len(prefix)] == high[len(prefix)]:
            prefix += low[len(prefix)]
        pattern = f"{low}|*" if first == last else f"{prefix}*"
        fields = cast(
            Iterable[tuple[str, str]], self.redis.hscan_iter(queue_keys(queue).stats, match=pattern, count=1000)
        )
        out: list[MinuteStat] = []
        for name, value in fields:
            minute, _, rest = name.partition("|")
            if minute.isdigit() and first <= int(minute) <= last:
                metric, _, task = rest.partition("|")
                out.append(MinuteStat(_minute_time(int(minute)), metric, task, int(value)))
        return with_totals(out)

    def minute_values(
        self, queue: str, minutes: Sequence[int], tasks: Sequence[str], names: Sequence[str] = metrics.ALL
    ) -> list[MinuteStat]:
        """The counters `names` of these tasks in these minutes (Unix minutes): one HMGET of the fields named,
        so it costs what it returns, however big the day's hash is. Counters never written are left out."""
        fetched = set(names)
        for total, prefix in metrics.TOTALS.items():
            if total in fetched:  # it includes the counts of its histogram
                fetched |= {name for name in metrics.SUMMED if name.startswith(prefix)}
        wanted = [(m, name, t) for m in minutes for t in tasks for name in sorted(fetched)]
        if not wanted:
            return []
        pipe = self.redis.pipeline(transaction=False)
        stats = queue_keys(queue).stats
        for start in range(0, len(wanted), 5000):
            pipe.hmget(stats, [f"{m}|{name}|{t}" for m, name, t in wanted[start : start + 5000]])
        values = [v for chunk in pipe.execute() for v in chunk]
        found = [
            MinuteStat(_minute_time(m), name, t, int(v))
            for (m, name, t), v in zip(wanted, values, strict=True)
            if v is not None
        ]
        asked = set(names)
        return [s for s in with_totals(found) if s.metric in asked]

    def gauges(self, queues: Sequence[str], *, grace_ms: int = 0) -> list[QueueGauges]:
        """Each queue's gauges (counts, the oldest waiting job, overdue running jobs), in one round trip; each
        queue's read is O(log n). `grace_ms`: how far behind its lease deadline a running job is overdue."""
        calls = [self.store.gauges_call(q, grace_ms=grace_ms) for q in queues]
        out: list[QueueGauges] = []
        for queue, reply in zip(queues, self.store.run_many(calls), strict=True):
            if isinstance(reply, Exception):
                raise reply
            now, paused, queued, scheduled, running, dead, oldest, overdue = reply
            since = datetime.fromtimestamp(oldest / 1000, tz=UTC) if oldest >= 0 else None
            at = datetime.fromtimestamp(now / 1000, tz=UTC)
            out.append(QueueGauges(queue, at, bool(paused), queued, scheduled, running, dead, since, overdue))
        return out

    def now_ms(self) -> int:
        """Redis's clock (ms): the clock of every deadline and counter minute."""
        return self.store.time_ms()

    def events(
        self, queue: str, *, after: str | None = None, limit: int = 100, newest_first: bool = False
    ) -> list[Event]:
        """Events of the queue's stream: oldest first after the entry id `after`, or the newest ones."""
        stream = queue_keys(queue).events
        if newest_first:
            high = f"({after}" if after else "+"
            entries = self.redis.xrevrange(stream, high, "-", count=limit)
        else:
            entries = self.redis.xrange(stream, f"({after}" if after else "-", "+", count=limit)
        return [Event(queue, entry_id, fields) for entry_id, fields in cast(list[tuple[str, dict[str, str]]], entries)]

    def task_options(self) -> dict[str, dict[str, Any]]:
        """Every task a worker announced, with its registered options."""
        raw = cast(dict[str, str], self.redis.hgetall(keys.TASKS))
        return {name: _json_dict(options) for name, options in sorted(raw.items())}

    def ping(self) -> float:
        """Seconds one round trip to Redis takes; raises redis.RedisError when it does not answer."""
        started = time.monotonic()
        self.redis.ping()
        return time.monotonic() - started


def with_totals(stats: Iterable[MinuteStat]) -> list[MinuteStat]:
    """The counters as readers know them: the hot path counts claimed jobs in `wait_h` only and completed ones in
    `done_h` only (core/metrics.py), so each minute and task's `started` and `completed` get those counts added."""
    out = list(stats)
    extra: dict[tuple[datetime, str, str], int] = {}
    for s in out:
        for total, prefix in metrics.TOTALS.items():
            if s.metric.startswith(prefix):
                key = (s.minute, total, s.task)
                extra[key] = extra.get(key, 0) + s.value
    if not extra:
        return out
    for i, s in enumerate(out):
        added = extra.pop((s.minute, s.metric, s.task), 0)
        if added:
            out[i] = MinuteStat(s.minute, s.metric, s.task, s.value + added)
    out += [MinuteStat(minute, total, task, value) for (minute, total, task), value in extra.items()]
    return out


def _minute_time(minute: int) -> datetime:
    return datetime.fromtimestamp(minute * 60, tz=UTC)


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


def _json_dict(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
