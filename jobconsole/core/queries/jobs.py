"""Jobs: one job with its attempts, jobs by id, a page of one state's jobs (cursor paging), and across queues the
delayed and retrying (or running) jobs merged by time, lease deadlines and how many jobs fall due when.

A job a fast enqueue accepted may still be an intake entry, so every read of a queue's jobs drains its intake first.
"""

import base64
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from typing import Literal, cast

from jobconsole.core import scripts
from jobconsole.core.errors import InvalidJob, JobNotFound
from jobconsole.core.job import Attempt, Job, attempt_history
from jobconsole.core.keys import queue_keys
from jobconsole.core.queries.base import Reader
from jobconsole.core.queries.queues import Queues
from jobconsole.core.states import STATES, JobState
from jobconsole.core.store import Store

PAGE_MAX = 1000


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
    kind: frozenset(s for s, info in STATES.items() if info.zset == zset)
    for kind, zset in (("scheduled", "scheduled"), ("running", "active"))
}

# An entry of a timed set across queues, in the order pages list them: (score, queue, member).
type _Entry = tuple[float, str, str]


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


class Jobs(Reader):
    def __init__(self, store: Store, queues: Queues) -> None:
        super().__init__(store)
        self.queues = queues

    def locate(self, job_id: str) -> str:
        """The queue holding a job (ids are unique across queues in practice; the first match wins)."""
        queues = self.queues.names()
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

    def get(self, job_id: str, queue: str | None = None, *, history: bool = True) -> Job:
        queue = queue or self.locate(job_id)
        for attempt in range(2):
            [found] = self.by_id([(queue, job_id)], history=history)
            if found is not None:
                return found
            if attempt == 0:
                self._drain(queue)  # look again even if this drain found nothing (see locate)
        raise JobNotFound(f"no job {job_id}")

    def by_id(self, jobs: Sequence[tuple[str, str]], *, history: bool | set[str] = False) -> list[Job | None]:
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

    def hashes(
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

    def histories(self, jobs: Sequence[Job]) -> list[list[Attempt]]:
        """The attempts of jobs read without them, in one round trip (their hashes complete a first attempt that
        succeeded: attempt_history)."""
        pipe = self.redis.pipeline(transaction=False)
        for job in jobs:
            pipe.lrange(queue_keys(job.queue).attempts(job.id), 0, -1)
        return [attempt_history(job.raw, entries) for job, entries in zip(jobs, pipe.execute(), strict=True)]

    def ids_in(self, queue: str, state: JobState, limit: int = 100) -> list[str]:
        """Ids in one state's set, oldest first (running: by lease deadline; queued: in claim order). Scheduled
        and retrying jobs share a set: either lists both."""
        self._drain(queue)
        return cast(list[str], self.redis.zrange(queue_keys(queue).state_set(state), 0, limit - 1))

    def ids(self, queue: str, states: Sequence[JobState] | None = None) -> list[str]:
        """Every id in the given states' sets (default: every set), each once."""
        self._drain(queue)
        k = queue_keys(queue)
        chosen = states or list(JobState)
        pipe = self.redis.pipeline(transaction=False)
        for key in dict.fromkeys(k.state_set(s) for s in chosen):
            pipe.zrange(key, 0, -1)
        return list(dict.fromkeys(i for members in pipe.execute() for i in members))

    def iterate(self, queue: str, states: Sequence[JobState] | None = None, *, chunk: int = 1000) -> Iterator[Job]:
        """Every job of the queue whose hash says it is in one of `states` (default: any), without history,
        read `chunk` at a time. Every set is looked at, so a job whose hash and set disagree is found too."""
        ids = self.ids(queue)
        for start in range(0, len(ids), chunk):
            for job in self.by_id([(queue, i) for i in ids[start : start + chunk]]):
                if job is not None and (states is None or job.state in states):
                    yield job

    def page(
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
        sets = [k.state_set(state)]
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
            for (member, score), job in zip(fresh, self.by_id([(queue, m) for m, _ in fresh]), strict=True):
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

    def timed(
        self, kind: TimedSet, queues: Sequence[str] | None = None, *, cursor: str | None = None, limit: int = 50
    ) -> TimedPage:
        """A page of every queue's delayed and retrying jobs, soonest due first (kind "scheduled"), or of its
        running jobs, earliest lease deadline first ("running"), each with that time. The queues' sets are
        merged in (time, queue, id) order; the cursor stays valid while jobs come and go."""
        if not 1 <= limit <= PAGE_MAX:
            raise InvalidJob(f"limit must be from 1 to {PAGE_MAX}; got {limit}")
        names = self.queues.names() if queues is None else list(queues)
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
            for entry, job in zip(batch, self.by_id([(q, m) for _, q, m in batch]), strict=True):
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
        names = self.queues.names() if queues is None else list(queues)
        edges = [int(b.timestamp() * 1000) for b in bounds]
        pipe = self.redis.pipeline(transaction=False)
        for queue in names:
            scheduled = queue_keys(queue).scheduled
            for low, high in pairwise(edges):
                pipe.zcount(scheduled, low, f"({high}")
        replies = cast(list[int], pipe.execute())
        width = max(0, len(edges) - 1)
        return [sum(replies[q * width + i] for q in range(len(names))) for i in range(width)]
