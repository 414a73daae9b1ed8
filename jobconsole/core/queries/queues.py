"""Queues: their names, counts by state set, pause, gauges, concurrency groups and queue limits."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from jobconsole.core import keys
from jobconsole.core.keys import queue_keys
from jobconsole.core.queries.base import Reader
from jobconsole.core.states import STATE_OF_SET


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """How many jobs each of a queue's state sets holds: every set in `sets` (by states.SET_NAMES), the ones
    the console and the API have always shown as fields too."""

    queue: str
    paused: bool
    sets: Mapping[str, int]  # set name -> jobs (ready includes the jobs held for a concurrency group's slot)

    @property
    def queued(self) -> int:
        return self.sets["ready"]

    @property
    def scheduled(self) -> int:
        """Delayed jobs and retries waiting for their backoff."""
        return self.sets["scheduled"]

    @property
    def running(self) -> int:
        return self.sets["active"]

    @property
    def completed(self) -> int:
        return self.sets["completed"]

    @property
    def failed(self) -> int:
        return self.sets["failed"]

    @property
    def dead(self) -> int:
        return self.sets["dead"]

    @property
    def dropped(self) -> int:
        return self.sets["dropped"]

    @property
    def cancelled(self) -> int:
        return self.sets["cancelled"]

    def by_state(self) -> dict[str, int]:
        """The counts named by state (a set two states share, by the first of them: scheduled)."""
        return {STATE_OF_SET[name]: n for name, n in self.sets.items()}


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


class Queues(Reader):
    def names(self) -> list[str]:
        """Every queue a job or a worker has used, by name."""
        return sorted(cast(set[str], self.redis.smembers(keys.QUEUES)))

    def counts(self, queue: str) -> QueueCounts:
        return self.counts_many([queue])[0]

    def counts_many(self, queues: Sequence[str]) -> list[QueueCounts]:
        """`counts` of each queue, in order, in three round trips however many queues (a page of every queue's
        figures read them one by one: three round trips a queue)."""
        self._drain_many(queues)
        every = [queue_keys(q) for q in queues]
        pipe = self.redis.pipeline(transaction=False)
        for k in every:
            pipe.exists(k.paused)
            for key in k.sets.values():
                pipe.zcard(key)
            pipe.smembers(k.groups)
        replies = pipe.execute() if every else []
        width = len(every[0].sets) + 2 if every else 0
        found: list[tuple[bool, dict[str, int], list[str]]] = []
        for i, k in enumerate(every):
            paused, *n, groups = replies[i * width : (i + 1) * width]
            found.append((bool(paused), dict(zip(k.sets, n, strict=True)), sorted(groups)))
        held = [(i, k.held(g)) for i, (k, (_, _, groups)) in enumerate(zip(every, found, strict=True)) for g in groups]
        if held:  # jobs held for a concurrency group's slot are queued too
            pipe = self.redis.pipeline(transaction=False)
            for _, key in held:
                pipe.zcard(key)
            for (i, _), n in zip(held, pipe.execute(), strict=True):
                found[i][1]["ready"] += n
        return [QueueCounts(q, paused, counts) for q, (paused, counts, _) in zip(queues, found, strict=True)]

    def is_paused(self, queue: str) -> bool:
        return bool(self.redis.exists(queue_keys(queue).paused))

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

    def flow_control(self) -> FlowControl:
        """Every concurrency group and queue limit, as they stand (two pipelined round trips)."""
        now = self.store.time_ms()
        queues = self.names()
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
