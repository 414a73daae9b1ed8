"""The typed results of the engine's Redis operations (store.py decodes each script's reply into one)."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from jobconsole.core.states import JobState


class Lease(NamedTuple):
    """A job leased to a worker: what `claim` returns per job and what an enqueue pushes to an idle worker's
    inbox (lease() in lua/_lib.lua, in this order)."""

    id: str
    token: str
    task: str
    attempt: int
    max_retries: int
    params: str  # as stored: decoded by the worker, which fails the job if it cannot be
    lease_ms: int
    timeout_ms: int  # 0 = none
    checkpoint: str  # '' = none
    leased_at: int  # Redis ms when the lease began


def decode_lease(v: Sequence[str]) -> Lease:
    # Built by tuple.__new__, skipping Lease.__new__ (a Python function): the worker decodes one per job.
    fields = (v[0], v[1], v[2], int(v[3]), int(v[4]), v[5], int(v[6]), int(v[7]) if v[7] else 0, v[8], int(v[9]))
    return _new_lease(Lease, fields)


LEASE_WIDTH = 10  # values per lease in a claim's flat reply (LEASE_WIDTH in lua/_lib.lua)


def decode_leases(v: Sequence[str], start: int) -> list[Lease]:
    """The leases of a claim's reply (claim.lua, claim_group.lua): LEASE_WIDTH values per job, flat, from `start`."""
    new = _new_lease
    leases = []
    for i in range(start, len(v), LEASE_WIDTH):
        job_id, token, task, attempt, retries, params, lease_ms, timeout_ms, checkpoint, leased_at = v[i : i + 10]
        fields = (job_id, token, task, int(attempt), int(retries), params, int(lease_ms),
                  int(timeout_ms) if timeout_ms else 0, checkpoint, int(leased_at))  # fmt: skip
        leases.append(new(Lease, fields))
    return leases


_new_lease: "Callable[[type[Lease], tuple[str, str, str, int, int, str, int, int, str, int]], Lease]" = tuple.__new__


class Claimed(NamedTuple):
    now_ms: int  # Redis's clock when the claim ran
    next_due_ms: int  # run-at of the earliest scheduled job, -1 when none
    leases: list[Lease]
    groups: list[str] = []  # concurrency groups with jobs held in the queue, waiting for a slot
    acks: list[int] = []  # the answers to the acks sent with the claim (an `Ack` per job, as complete's)


class SlotGrant(NamedTuple):
    """What `group_acquire` granted: slot tokens (leases of the group's own), fewer than asked when the group is
    at its limit; then `retry_at_ms` says when one frees up (-1: only when a holder gives one back)."""

    now_ms: int
    retry_at_ms: int
    tokens: list[str]


class Ack(IntEnum):
    """`complete`'s answer per job."""

    STALE = 0  # the lease was lost: another worker owns the job now
    COMPLETED = 1
    REPEATED = 2  # already completed under this token (a retried ack)


class Beat(IntEnum):
    """`heartbeat`'s answer per job."""

    LOST = -1  # stale token: the lease is gone
    RENEWED = 0
    CANCEL_REQUESTED = 1  # renewed, and an operator asked the job to stop


class Failed(NamedTuple):
    recorded: bool  # False: stale token
    state: str  # the job's state now


class Lapsed(NamedTuple):
    """A worker declared gone whose jobs are to be taken back (lapse.lua)."""

    worker: str
    queues: list[str]  # the queues it served ([] when its registry hash was gone too: look at every queue)
    last_beat_ms: int  # Redis ms of its last heartbeat (0: unknown)
    now_ms: int  # Redis ms it was declared gone


class Recovered(NamedTuple):
    requeued: list[str]
    ended: list[str]  # attempts used up: dead-lettered (or failed, for a discard policy); or cancelled as asked


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    id: str  # the job's, or for a 'duplicate' the live job's that holds the unique key
    queue: str
    state: JobState
    status: str  # 'created', 'exists' (same id seen before: idempotent) or 'duplicate' (unique key held)

    @property
    def created(self) -> bool:
        return self.status == "created"


class Edited(NamedTuple):
    status: str  # 'edited', 'resubmitted', 'already' (stamped edit repeated), 'missing', 'conflict' or 'duplicate'
    state: str


class Handed(NamedTuple):
    """What a worker's blocking wait brought: a job leased to it, or (lease None) a wake-up to claim."""

    queue: str
    lease: Lease | None


@dataclass(frozen=True, slots=True)
class SlotRecord:
    """One periodic schedule's bookkeeping in Redis (periodic.lua)."""

    handled_ms: int | None  # every slot at or before this instant is handled (fired or skipped); None: new
    pending_job: str = ""  # a job claimed for a slot whose enqueue is not confirmed yet ...
    pending_slot_ms: int = 0  # ... for this slot ...
    pending_since_ms: int = 0  # ... since when
    last_slot_ms: int | None = None  # the last job fired: its slot, id and when
    last_job: str = ""
    last_fired_ms: int | None = None
