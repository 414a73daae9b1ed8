"""The job states: one table (`STATES`) says, per state, everything the rest of the project derives from it.

A state's row: the Redis set (per queue) its jobs sit in, whether it is terminal, waiting (not yet run) or
resubmittable, how long Redis and the database keep its jobs, its names in Django's task framework, Celery,
Jobbers and the Go scheduler, and how the console shows it. Key names (`keys.QueueKeys.sets`), the Lua
scripts' constants (`LUA_CONSTANTS`, `LUA_TABLES`), the retention settings, the model's choices, the console's
tabs and badges, and the adapters' status maps all come from here: adding a state is a member and a row.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

DAY = 86_400.0


class JobState(StrEnum):
    # The members' order is the model's choices' order (a migration): new states go at the end.
    SCHEDULED = "scheduled"  # waiting for its run_at (a delay)
    QUEUED = "queued"  # ready; workers claim in priority, then FIFO, order
    RUNNING = "running"  # claimed by a worker under a lease
    RETRYING = "retrying"  # an attempt failed; waiting for its backoff to pass
    COMPLETED = "completed"
    DEAD = "dead"  # attempts exhausted (or not retryable); in the dead-letter queue, can be requeued
    FAILED = "failed"  # as dead, for tasks whose dead_letter_policy is "discard"; expires like completed
    CANCELLED = "cancelled"
    DROPPED = "dropped"  # a worker claimed it but has no such task registered; kept, can be requeued
    WAITING = "waiting"  # waiting for other jobs (its dependencies) to end; not claimable until they release it

    @property
    def info(self) -> "StateInfo":
        return STATES[self]

    @property
    def is_terminal(self) -> bool:
        return STATES[self].terminal

    @property
    def is_waiting(self) -> bool:
        return STATES[self].waiting


@dataclass(frozen=True, slots=True, kw_only=True)
class StateInfo:
    """One row of the table."""

    zset: str  # the per-queue Redis sorted set holding its jobs: a name of keys.QueueKeys.sets (shared or its own)
    terminal: bool = False  # it ended: nothing runs it again unless an operator brings it back
    waiting: bool = False  # not yet run: operators edit it in place, a cancel ends it at once
    resubmittable: bool = False  # an ended job an operator may bring back (requeue, resubmit, edit and retry)
    redis_retention: float | None = None  # terminal: seconds Redis keeps it (RETENTION.<state>)
    db_retention: float | None = None  # terminal: seconds the database keeps it (DB_RETENTION.<state>)
    label: str  # the console's words for it (its tab, its badge's title)
    tone: str  # the console's colour: a badge class of console.css (ok, warn, bad, info)
    mark: str = ""  # a sign before its name in the console's badge (never colour alone)
    place: int  # its tab's position on a queue's page
    django: str  # a member of django.tasks.TaskResultStatus
    celery: str  # Celery's state name (celery.states)
    jobbers: str  # what Jobbers' HTTP interface reported (docs/seeds.md)
    go: str  # what the Go scheduler reported

    @property
    def cancellable(self) -> bool:
        """A cancel ends it (a running job: asks its worker to stop)."""
        return not self.terminal

    @property
    def runs_now_on_requeue(self) -> bool:
        """A requeue ("run now") moves it to the ready set: delayed jobs and retries, not jobs that wait on other
        jobs, nor jobs already ready."""
        return self.waiting and self.zset == "scheduled"

    @property
    def requeueable(self) -> bool:
        return self.resubmittable or self.runs_now_on_requeue


# Jobbers reports a running job whose lease ran out as "stalled" (jobconsole_api/seeds/jobbers.py); the Go
# scheduler had no cancel and no dropped state, so both read as FAILED there.
STATES: Mapping[JobState, StateInfo] = MappingProxyType(
    {
        JobState.SCHEDULED: StateInfo(
            zset="scheduled", waiting=True, label="scheduled", tone="warn", place=2,
            django="READY", celery="PENDING", jobbers="scheduled", go="PENDING",
        ),
        JobState.QUEUED: StateInfo(
            zset="ready", waiting=True, label="queued", tone="info", place=0,
            django="READY", celery="PENDING", jobbers="submitted", go="PENDING",
        ),
        JobState.RUNNING: StateInfo(
            zset="active", label="running", tone="info", mark="▶", place=1,
            django="RUNNING", celery="STARTED", jobbers="started", go="IN_PROGRESS",
        ),
        JobState.RETRYING: StateInfo(
            zset="scheduled", waiting=True, label="retrying", tone="warn", place=3,
            django="READY", celery="RETRY", jobbers="scheduled", go="RETRYING",
        ),
        JobState.COMPLETED: StateInfo(
            zset="completed", terminal=True, redis_retention=DAY, db_retention=30 * DAY,
            label="completed", tone="ok", mark="✓", place=7,
            django="SUCCESSFUL", celery="SUCCESS", jobbers="completed", go="COMPLETED",
        ),
        JobState.DEAD: StateInfo(
            zset="dead", terminal=True, resubmittable=True, redis_retention=30 * DAY, db_retention=90 * DAY,
            label="dead", tone="bad", mark="✕", place=5,
            django="FAILED", celery="FAILURE", jobbers="failed", go="FAILED",
        ),
        JobState.FAILED: StateInfo(
            zset="failed", terminal=True, resubmittable=True, redis_retention=7 * DAY, db_retention=30 * DAY,
            label="failed (discarded)", tone="bad", mark="✕", place=6,
            django="FAILED", celery="FAILURE", jobbers="failed", go="FAILED",
        ),
        JobState.CANCELLED: StateInfo(
            zset="cancelled", terminal=True, resubmittable=True, redis_retention=DAY, db_retention=30 * DAY,
            label="cancelled", tone="warn", place=8,
            django="FAILED", celery="REVOKED", jobbers="cancelled", go="FAILED",
        ),
        # Claimed by a worker that does not know its task: never started; Django has no state for that.
        JobState.DROPPED: StateInfo(
            zset="dropped", terminal=True, resubmittable=True, redis_retention=30 * DAY, db_retention=90 * DAY,
            label="dropped", tone="bad", place=9,
            django="FAILED", celery="FAILURE", jobbers="dropped", go="FAILED",
        ),
        # In a set of its own (scored by the ms it began waiting), which no claim reads: the workflow engine moves it
        # to the ready set once its dependencies allow. Django has no "blocked" status: READY (not yet run) is the
        # nearest; Celery shows a chord's waiting body as PENDING; Jobbers' "scheduled" (runs later, not now).
        JobState.WAITING: StateInfo(
            zset="waiting", waiting=True, label="waiting on dependencies", tone="info", mark="◌", place=4,
            django="READY", celery="PENDING", jobbers="scheduled", go="PENDING",
        ),
    }
)  # fmt: skip

assert set(STATES) == set(JobState), "every state needs its row"

# Derived lists: use these, never a list of members written out.
TERMINAL_STATES = frozenset(s for s, i in STATES.items() if i.terminal)
WAITING_STATES = frozenset(s for s, i in STATES.items() if i.waiting)
RESUBMITTABLE_STATES = frozenset(s for s, i in STATES.items() if i.resubmittable)
CANCELLABLE_STATES = frozenset(s for s, i in STATES.items() if i.cancellable)
REQUEUEABLE_STATES = frozenset(s for s, i in STATES.items() if i.requeueable)
CONSOLE_ORDER: tuple[JobState, ...] = tuple(sorted(STATES, key=lambda s: STATES[s].place))
# The per-queue sorted sets, each once, in the table's order (the `sets` KEYS block of a script).
SET_NAMES: tuple[str, ...] = tuple(dict.fromkeys(i.zset for i in STATES.values()))
# Each set by the first state the table puts in it (how counts by set are named: ready -> queued).
STATE_OF_SET: Mapping[str, str] = MappingProxyType({name: next(s.value for s, i in STATES.items() if i.zset == name)
                                                  for name in SET_NAMES})  # fmt: skip
# Terminal states own their set (trim.lua forgets a whole set by age).
assert all(i.zset == s.value for s, i in STATES.items() if i.terminal)

JOBBERS_STATUS: Mapping[JobState, str] = MappingProxyType({s: i.jobbers for s, i in STATES.items()})
GO_SCHEDULER_STATUS: Mapping[JobState, str] = MappingProxyType({s: i.go for s, i in STATES.items()})
REDIS_RETENTION: Mapping[str, float] = MappingProxyType(
    {s.value: i.redis_retention for s, i in STATES.items() if i.redis_retention is not None}
)
DB_RETENTION: Mapping[str, float] = MappingProxyType(
    {s.value: i.db_retention for s, i in STATES.items() if i.db_retention is not None}
)


def _lua_set(states: frozenset[JobState]) -> str:
    return "{" + ", ".join(f"{s.value} = true" for s in JobState if s in states) + "}"


# Prepended to every script (scripts.py): each state's name as a constant (QUEUED = 'queued'), so no script spells
# a state. Plain locals: they cost a script call nothing worth measuring.
LUA_CONSTANTS = (
    f"local {', '.join(s.name for s in JobState)} = {', '.join(repr(s.value) for s in JobState)}"
    "  -- jobconsole/core/states.py\n"
)
# Prepended only to the scripts that use them (building tables costs every call): the table as Lua sees it.
# A script that acts on a job in whatever state names `sets` last in its KEYS line; `state_key(state)` is then
# the key of that state's set, `set_key(name)` of a set by name.
LUA_TABLES = "\n".join(
    [
        "-- The job states' table (jobconsole/core/states.py)",
        "local STATE_SET = {" + ", ".join(f"{s.value} = {i.zset!r}" for s, i in STATES.items()) + "}",
        "local SET_INDEX = {" + ", ".join(f"{name} = {n}" for n, name in enumerate(SET_NAMES, 1)) + "}",
        f"local N_SETS = {len(SET_NAMES)}",
        f"local IS_TERMINAL = {_lua_set(TERMINAL_STATES)}",
        f"local IS_WAITING = {_lua_set(WAITING_STATES)}",
        f"local IS_RESUBMITTABLE = {_lua_set(RESUBMITTABLE_STATES)}",
        f"local IS_REQUEUEABLE = {_lua_set(REQUEUEABLE_STATES)}",
        "local function set_key(name) return KEYS[#KEYS - N_SETS + SET_INDEX[name]] end",
        "local function state_key(state) return set_key(STATE_SET[state]) end",
        "-- Take a job out of every set but the running one (the ready one through unready: a group's held set too).",
        "local function leave_sets(job_key, job_id)",
        "  unready(set_key('ready'), job_key, job_id)",
        "  for name, i in pairs(SET_INDEX) do",
        "    if name ~= 'ready' and name ~= 'active' then redis.call('ZREM', KEYS[#KEYS - N_SETS + i], job_id) end",
        "  end",
        "end",
        "",
    ]
)
LUA_TABLE_NAMES = ("STATE_SET", "SET_INDEX", "N_SETS", "IS_TERMINAL", "IS_WAITING", "IS_RESUBMITTABLE",
                   "IS_REQUEUEABLE", "set_key", "state_key", "leave_sets")  # fmt: skip
