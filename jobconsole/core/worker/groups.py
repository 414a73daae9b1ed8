"""Claiming jobs of concurrency groups: a slot of the group first (its own Redis slot), then the job (the
queue's), and the slots that found no job given back (docs/concepts.md, "Concurrency groups")."""

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from jobconsole.core.execution import RunningJob
from jobconsole.core.results import Lease
from jobconsole.core.store import Call, Store, WorkerIdentity

log = logging.getLogger("jobconsole.core.worker")

RECHECK_S = 1.0  # a group found full is asked again after this at the latest, should a release's wake be lost

Starter = Callable[[str, Lease, float, int], RunningJob | None]


class GroupClaims:
    """Takes group slots and claims the jobs held for them; remembers groups found full, so that a busy worker
    does not ask a full group again at every claim (a release, or the time it named, makes it ask again)."""

    def __init__(
        self, store: Store, identity: WorkerIdentity, running: dict[str, RunningJob], start: Starter,
        *, lease_ms: Callable[[str], int],
    ) -> None:  # fmt: skip
        self._store = store
        self._identity = identity
        self._running = running
        self._start = start
        # A slot's first lease, before its job is known: the longest lease of the group's tasks here. Once the
        # job runs, the slot's lease follows the job's (renewed right after the claim when the job's is longer,
        # then with every heartbeat), so a slot never lapses before its job's lease and outlives a dead
        # worker's job by little.
        self.lease_ms = lease_ms
        self._full_until: dict[str, float] = {}  # group -> monotonic time to ask again
        self.retry_at_ms = -1  # Redis ms when a rate-limited group allows its next start (-1: none)

    def claim(self, queue: str, groups: list[str], free: int) -> int:
        """Claim up to `free` jobs of `groups` held in `queue`; returns the jobs started."""
        started = 0
        now = time.monotonic()
        for group in groups:
            if free - started <= 0:
                break
            if self._full_until.get(group, 0.0) > now:
                continue
            want = free - started
            grant = self._store.group_acquire(
                group, want, holder=self._identity.id, lease_ms=self.lease_ms(group), queue=queue
            )
            if len(grant.tokens) < want:
                wait_s = (grant.retry_at_ms - grant.now_ms) / 1000 if grant.retry_at_ms >= 0 else RECHECK_S
                self._full_until[group] = now + min(max(wait_s, 0.001), RECHECK_S)
                if grant.retry_at_ms >= 0 and (self.retry_at_ms < 0 or grant.retry_at_ms < self.retry_at_ms):
                    self.retry_at_ms = grant.retry_at_ms
            if grant.tokens:
                started += self._claim_with(queue, group, grant.tokens)
        return started

    def _claim_with(self, queue: str, group: str, tokens: list[str]) -> int:
        sent = time.monotonic()
        try:
            claimed = self._store.run(self._store.claim_group_call(queue, group, self._identity, len(tokens)))
        except Exception:
            self.release(group, tokens, unused=True)  # the claim may have run: its jobs' leases expire
            raise
        started = 0
        dropped: list[str] = []
        longer: list[RunningJob] = []  # jobs whose lease outlasts their slot's first lease
        for lease, token in zip(claimed.leases, tokens, strict=False):
            job = self._start(queue, lease, sent, claimed.now_ms)
            held = self._running.get(lease.id)
            if held is not None:
                held.slot = (group, token)
                started += job is not None
                if lease.lease_ms > self.lease_ms(group):
                    longer.append(held)
            else:  # dropped at once (no such task here): its slot is free again
                dropped.append(token)
        if longer:
            self._store.run_many(self.renew_calls(longer))
        if dropped:
            self.release(group, dropped, unused=False)
        if len(claimed.leases) < len(tokens):  # no job for these (another worker was faster): no start counted
            self.release(group, tokens[len(claimed.leases) :], unused=True)
        return started

    def release(self, group: str, tokens: list[str], *, unused: bool) -> None:
        """Give slots back now, waking the queues that waited for one."""
        self.wake(self._store.run(self._store.group_release_call(group, tokens, unused=unused)))

    def release_calls(self, jobs: list[RunningJob]) -> list[Call[list[str]]]:
        """The calls giving back the slots of jobs whose outcomes are being reported (one per group)."""
        by_group = _tokens_by(jobs, lambda job, group: group)
        for group in by_group:
            self._full_until.pop(group, None)  # a slot of ours frees up: worth asking again
        return [self._store.group_release_call(g, tokens, unused=False) for g, tokens in by_group.items()]

    def released(self, replies: list[Any]) -> None:
        """Wake the queues the releases named (a worker there came short of a slot)."""
        queues = {q for reply in replies if not isinstance(reply, Exception) for q in reply}
        self.wake(list(queues))

    def wake(self, queues: list[str]) -> None:
        if queues:
            self._store.wake(queues)

    def renew_calls(self, jobs: list[RunningJob]) -> list[Call[int]]:
        """The calls extending the slots of running jobs by their jobs' leases (with their heartbeats)."""
        by_lease = _tokens_by(jobs, lambda job, group: (group, int(job.lease_s * 1000)))
        return [self._store.group_renew_call(g, t, lease_ms=ms) for (g, ms), t in by_lease.items()]

    def waits_on(self, running: Iterable[RunningJob]) -> bool:
        """A group found full holds slots of ours: one of our jobs ending is what frees the next."""
        if not self._full_until:
            return False
        now = time.monotonic()
        full = {g for g, until in self._full_until.items() if until > now}
        return any(job.slot is not None and job.slot[0] in full for job in running)

    def unblock(self) -> None:
        """A wake-up came: a group found full may have a free slot now."""
        self._full_until.clear()
        self.retry_at_ms = -1


def _tokens_by[K](jobs: Iterable[RunningJob], key: Callable[[RunningJob, str], K]) -> dict[K, list[str]]:
    """The slot tokens of the jobs holding one, gathered by `key(job, group)`: one script call per key."""
    out: dict[K, list[str]] = {}
    for job in jobs:
        if job.slot is not None:
            out.setdefault(key(job, job.slot[0]), []).append(job.slot[1])
    return out
