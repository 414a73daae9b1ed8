"""Every Redis key the engine uses, named in this one module.

Per-queue keys carry the hash tag ``{q:<queue>}`` so that every key one script touches lives in one
Redis Cluster slot; job keys are ``<prefix>{q:<queue>}:job:<id>`` for the same reason, which is why
scripts may build a job key from the declared job-key prefix and an id.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType

from jobconsole.core.states import SET_NAMES, STATES, TERMINAL_STATES, JobState

PREFIX = "jc"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]{1,100}$")

# Global keys: each group has its own hash tag (one slot per group).
QUEUES = f"{PREFIX}:{{meta}}:queues"  # SET of every queue name ever used
TASKS = f"{PREFIX}:{{meta}}:tasks"  # HASH task name -> JSON of its registered options (for the console)
ROLES = f"{PREFIX}:{{meta}}:roles"  # HASH worker role -> JSON list of the queues its workers serve (Jobbers' roles)
MAINTENANCE_LOCK = f"{PREFIX}:{{meta}}:lock:maintenance"  # leader lock of the recoverer/promoter/trimmer
WORKERS = f"{PREFIX}:{{workers}}:index"  # ZSET worker id -> last heartbeat ms
# Process heartbeats (core/worker/liveness.py, core/lapse.py), in the registry's slot so that one script sees
# them with the registry: a worker's deadline, the workers declared gone (their records kept for a while, and
# an id declared gone never beats again), and those whose jobs are being taken back.
ALIVE = f"{PREFIX}:{{workers}}:alive"  # ZSET worker id -> deadline ms (Redis time of its last beat + its expiry)
GONE = f"{PREFIX}:{{workers}}:gone"  # ZSET worker id -> ms it was declared gone
TAKING = f"{PREFIX}:{{workers}}:taking"  # ZSET worker id -> ms a recoverer began taking its jobs back
WORKERS_SEEN = f"{PREFIX}:{{workers}}:seen"  # STRING Redis ms of the last lapse scan (a longer silence: spare)


def worker_key(worker_id: str) -> str:
    return f"{PREFIX}:{{workers}}:w:{worker_id}"


@dataclass(frozen=True, slots=True)
class QueueKeys:
    """The keys of one queue. ZSETs are scored by priority/sequence (ready), run-at ms (scheduled),
    lease deadline ms (active), or finish ms (terminal sets). Each job state's set (states.py, its `zset`) is
    in `sets`, by name; the three every hot path uses are fields too."""

    queue: str
    ready: str
    scheduled: str
    active: str
    sets: Mapping[str, str]  # every state's set by name (states.SET_NAMES): ready, scheduled, active, dead, ...
    paused: str
    unique: str
    events: str
    wake: str
    seq: str
    stats: str
    idle: str  # ZSET of idle workers' registrations, scored by the ms they are valid until
    intake: str  # STREAM of jobs a fast enqueue accepted, not yet made into job hashes (drain_intake)
    limit: str  # STRING: the most jobs of the queue running at once, across workers (absent: no limit)
    groups: str  # SET of the concurrency groups with jobs held in this queue (held_key in lua/_lib.lua)
    job_prefix: str
    inbox_prefix: str  # + worker id: LIST of jobs an enqueue leased straight to that (idle) worker

    def inbox(self, worker_id: str) -> str:
        return self.inbox_prefix + worker_id

    def held(self, group: str) -> str:
        """ZSET of the queue's jobs of `group` waiting for one of its slots (scored like `ready`)."""
        return self.ready.removesuffix("ready") + "held:" + group

    def job(self, job_id: str) -> str:
        return self.job_prefix + job_id

    def workflow(self, workflow_id: str) -> str:
        """HASH of a workflow whose first step is in this queue (core/workflows.py): id, name, queue, created_at,
        size, cancelled_at, and `step:<name>` -> "<queue>|<job id>" per step."""
        return self.job_prefix.removesuffix("job:") + "wf:" + workflow_id

    def base(self, name: str) -> str:
        """A key of this queue by its name."""
        return self.job_prefix.removesuffix("job:") + name

    # Cluster, workflows spanning slots (docs/architecture.md, "Crossing slots on a Cluster"):
    @property
    def wf_creating(self) -> str:
        """ZSET of workflows homed here whose creation is not done, scored by its deadline (ms)."""
        return self.base("wf_creating")

    @property
    def deps_out(self) -> str:
        """HASH: the outbox of this queue's parents to dependents in other slots, the latest message per link."""
        return self.base("deps_out")

    @property
    def deps_due(self) -> str:
        """ZSET: the outbox's fields by the ms the relayer takes them."""
        return self.base("deps_due")

    @property
    def deps_acked(self) -> str:
        """SET: the outbox's fields applied once, waiting for their second application."""
        return self.base("deps_acked")

    def attempts(self, job_id: str) -> str:
        return self.job_prefix + job_id + ":attempts"

    @property
    def drain_keys(self) -> list[str]:
        """The KEYS block `drain_intake_at` in lua/_lib.lua reads: appended to the keys of every script that
        acts on a job by id, which drains the intake first (a job handed to a worker may still be an entry)."""
        return [self.intake, self.ready, self.seq, self.events, self.stats, self.active]

    def state_set(self, state: JobState) -> str:
        """The set holding the jobs of `state` (scheduled and retrying share one)."""
        return self.sets[STATES[state].zset]

    @property
    def terminal_sets(self) -> dict[str, str]:
        return {s.value: self.state_set(s) for s in JobState if s in TERMINAL_STATES}


@cache
def queue_keys(queue: str) -> QueueKeys:
    if not NAME_PATTERN.match(queue):
        raise ValueError(f"invalid queue name {queue!r}")
    base = f"{PREFIX}:{{q:{queue}}}:"
    return QueueKeys(
        queue=queue,
        sets=MappingProxyType({name: base + name for name in SET_NAMES}),
        **{
            name: base + name
            for name in [
                "ready",
                "scheduled",
                "active",
                "paused",
                "unique",
                "events",
                "wake",
                "seq",
                "stats",
                "idle",
                "intake",
                "limit",
                "groups",
            ]
        },
        job_prefix=base + "job:",
        inbox_prefix=base + "inbox:",
    )


GROUPS = f"{PREFIX}:{{meta}}:groups"  # SET of every concurrency group defined (the console lists them)


@dataclass(frozen=True, slots=True)
class GroupKeys:
    """The keys of one concurrency group, in a slot of their own ({g:<group>}): a group spans queues, so
    taking a slot and claiming a job are two scripts (docs/concepts.md, "Concurrency groups")."""

    group: str
    conf: str  # HASH connections, requests, period_ms
    slots: str  # ZSET slot token -> lease deadline ms
    starts: str  # ZSET slot token -> start ms, within the rate window
    waiting: str  # SET of queues whose workers came short of slots
    seq: str  # STRING counter for slot tokens
    seen: str  # STRING Redis ms the group was last touched (a longer silence: Redis was away, see _lib.lua)


@cache
def group_keys(group: str) -> GroupKeys:
    if not NAME_PATTERN.match(group):
        raise ValueError(f"invalid group name {group!r}")
    base = f"{PREFIX}:{{g:{group}}}:"
    return GroupKeys(
        group=group, **{name: base + name for name in ("conf", "slots", "starts", "waiting", "seq", "seen")}
    )


# The database mirror's leader lock; it reads each queue's events stream through one consumer group.
MIRROR_LOCK = f"{PREFIX}:{{meta}}:lock:mirror"
MIRROR_GROUP = "jc-mirror"
# Periodic jobs (core/periodic.py): the scheduler leader's lock, and per schedule name the instant every slot
# up to which has been handled (fired or skipped), the slot claimed but whose enqueue is not yet confirmed,
# and the last job fired. One hash tag, so periodic.lua's keys share a cluster slot.
SCHEDULER_LOCK = f"{PREFIX}:{{meta}}:lock:scheduler"
PERIODIC_HANDLED = f"{PREFIX}:{{sched}}:handled"  # HASH name -> ms: every slot at or before it is handled
PERIODIC_PENDING = f"{PREFIX}:{{sched}}:pending"  # HASH name -> "<job id>|<slot ms>|<claimed at ms>"
PERIODIC_LAST = f"{PREFIX}:{{sched}}:last"  # HASH name -> "<slot ms>|<job id>|<fired at ms>"
LOCKS = {"maintenance": MAINTENANCE_LOCK, "mirror": MIRROR_LOCK, "scheduler": SCHEDULER_LOCK}


# Counter the mirror leader increments with every read and records in the database: a value not above the
# recorded one means Redis lost writes the database had seen (a restored or truncated AOF, a new empty Redis).
REDIS_EPOCH = f"{PREFIX}:{{meta}}:epoch"
# Health's write probe (core/redis_health.py): a tiny STRING set with a short expiry, one key in one slot.
HEALTH_PROBE = f"{PREFIX}:{{meta}}:health-probe"


def lock_key(name: str) -> str:
    return LOCKS[name]


def idempotency_key(scope: str, key_digest: str) -> str:
    """An Idempotency-Key's record (STRING, JSON, expiring): `scope` is the caller (an API token's id),
    `key_digest` the key's SHA-256, so any key the client sends makes a key of bounded length."""
    return f"{PREFIX}:{{api}}:idem:{scope}:{key_digest}"
