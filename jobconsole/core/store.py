"""The engine's write path to Redis: one typed method per Lua script, and the few plain commands around them.

Nothing else runs a script or names a key of the write path. Each script's header declares its KEYS by name
(``-- KEYS: active events drain``); `script_keys` fills those names in from `keys.py`, so the order of a
script's keys is written once, in the script. Methods that callers batch into one round trip (a worker
reports outcomes and claims together) also come as a `*_call` returning a `Call`, run with `run_many`.
Readers (the console, the admin, the mirror, the cleaner) use `core/queries/`.
"""

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import chain
from typing import TYPE_CHECKING, Any, cast

import redis

from jobconsole.core import cluster, keys, scripts
from jobconsole.core.keys import QueueKeys, group_keys, queue_keys
from jobconsole.core.results import (
    Claimed,
    Edited,
    EnqueueResult,
    Failed,
    Handed,
    Lapsed,
    Recovered,
    SlotGrant,
    SlotRecord,
    decode_lease,
    decode_leases,
)
from jobconsole.core.scripts import Arg
from jobconsole.core.states import JobState

if TYPE_CHECKING:
    from jobconsole.core.replace import ReplaceArgs

DEFAULT_EVENTS_MAXLEN = 100_000
INTAKE_MAX = 1000  # lua/_lib.lua's: an enqueue that finds this many entries in a queue's intake drains it


@dataclass(frozen=True, slots=True)
class Call[T]:
    """One script call, and how its reply becomes a typed result."""

    script: str
    keys: Sequence[str]
    args: Sequence[Arg]
    decode: Callable[[Any], T]


@dataclass(frozen=True, slots=True)
class Appended:
    """What Store.append_intake saw right after its XADD."""

    waiting: int  # entries in the intake, this one included
    idle: int  # workers registered idle on the queue (some may have lapsed)
    acknowledged: int  # replicas that acknowledged the write (0 when not asked)


@dataclass(frozen=True, slots=True)
class WorkerIdentity:
    """How a worker is named to the scripts: its id, host and pid, and its idle registration."""

    id: str
    host: str
    pid: int
    idle_member: str = field(init=False, repr=False, compare=False)  # every claim sends it: encoded once

    def __post_init__(self) -> None:
        object.__setattr__(self, "idle_member", json.dumps([self.id, self.host, self.pid]))


_GLOBAL = {
    "queues": keys.QUEUES, "tasks": keys.TASKS, "workers": keys.WORKERS, "epoch": keys.REDIS_EPOCH,
    "alive": keys.ALIVE, "gone": keys.GONE, "taking": keys.TAKING, "seen": keys.WORKERS_SEEN,
}  # fmt: skip
WAKE_TOKEN = '["wake"]'  # in a worker's inbox: see Store.wake_waiting (JSON, as claim.lua decodes every entry)
WORKER_PREFIX = keys.worker_key("")  # worker hash names are this + id, in the registry's slot


def _fill(script: str, k: QueueKeys | None, named: dict[str, str]) -> list[str]:
    out: list[str] = []
    for name in scripts.load(script).keys:
        if name == "drain" and k is not None:
            out += k.drain_keys
        elif name == "sets" and k is not None:  # every state's set, in states.SET_NAMES order (always last)
            out += k.sets.values()
        elif name in named:
            out.append(named[name])
        elif name in _GLOBAL:
            out.append(_GLOBAL[name])
        elif k is not None and name in k.sets:
            out.append(k.sets[name])
        elif k is not None and hasattr(k, name):
            out.append(getattr(k, name))
        else:
            raise KeyError(f"lua/{script}.lua declares key {name!r}, which the caller did not give")
    return out


@cache
def script_keys(script: str, queue: str, worker: str = "") -> tuple[str, ...]:
    """A queue script's KEYS, in the order its header declares them (`inbox` is the worker's)."""
    k = queue_keys(queue)
    return tuple(_fill(script, k, {"inbox": k.inbox(worker)} if worker else {}))


@cache
def group_script_keys(script: str, group: str) -> tuple[str, ...]:
    """A concurrency group script's KEYS (all in the group's own slot)."""
    g = group_keys(group)
    return tuple(_fill(script, None, {n: getattr(g, n) for n in ("conf", "slots", "starts", "waiting", "seq", "seen")}))


def _int(reply: Any) -> int:
    return int(reply)


def _bool(reply: Any) -> bool:
    return bool(reply)


def _str(reply: Any) -> str:
    return str(reply)


def _optional_str(reply: Any) -> str | None:
    return None if reply is None else str(reply)


def _strings(reply: Any) -> list[str]:
    return [str(r) for r in reply]


def _raw(reply: Any) -> Any:
    return reply


def _ints(reply: Any) -> list[int]:
    return [int(r) for r in reply]


def _flat(rows: Iterable[tuple[Arg, ...]]) -> Iterable[Arg]:
    """Per-job argument tuples as one run of arguments, without a Python call per job."""
    return chain.from_iterable(rows)


def _claimed(reply: Any) -> Claimed:
    return Claimed(int(reply[0]), int(reply[1]), decode_leases(reply, 4), [str(g) for g in reply[2]], _ints(reply[3]))


def _group_claimed(reply: Any) -> Claimed:
    return Claimed(int(reply[0]), -1, decode_leases(reply, 1))


def _group_slots(reply: Any) -> SlotGrant:
    return SlotGrant(int(reply[0]), int(reply[1]), [str(t) for t in reply[2:]])


def _pair(reply: Any) -> tuple[str, str]:
    return str(reply[0]), str(reply[1])


def _recovered(reply: Any) -> Recovered:
    ids = [str(r) for r in reply]
    split = ids.index("|")
    return Recovered(ids[:split], ids[split + 1 :])


def _failed(reply: Any) -> Failed:
    return Failed(bool(reply[0]), str(reply[1]))


class Store:
    """Runs the engine's scripts against one Redis. Thread-safe (redis-py's pool)."""

    def __init__(self, connection: "redis.Redis", *, events_maxlen: int = DEFAULT_EVENTS_MAXLEN) -> None:
        self.redis = connection
        self.events_maxlen = events_maxlen
        self.cluster = cluster.is_cluster(connection)  # a Redis Cluster: see core/cluster.py

    # --- running calls ----------------------------------------------------------------------------

    def run[T](self, call: Call[T], *, spin_s: float = 0.0) -> T:
        """One call, one round trip; raises what the script raises. `spin_s`: see wire.py."""
        return call.decode(scripts.run(self.redis, call.script, call.keys, call.args, spin_s=spin_s))

    def run_many(self, calls: Sequence[Call[Any]]) -> list[Any]:
        """Many calls in one round trip: each result decoded, or the exception its script raised."""
        replies = scripts.run_many(self.redis, [(c.script, c.keys, c.args) for c in calls])
        return [r if isinstance(r, Exception) else c.decode(r) for c, r in zip(calls, replies, strict=True)]

    def run_replicated(
        self, calls: Sequence[Call[Any]], replicas: int, timeout_ms: int, *, spin_s: float = 0.0
    ) -> tuple[list[Any], int]:
        """`run_many`, then Redis's WAIT in the same round trip: the results, and how many replicas acknowledged
        the writes within `timeout_ms` (client.py's `replicas`)."""
        replies, acknowledged = scripts.run_many_replicated(
            self.redis, [(c.script, c.keys, c.args) for c in calls], replicas, timeout_ms, spin_s=spin_s
        )
        decoded = [r if isinstance(r, Exception) else c.decode(r) for c, r in zip(calls, replies, strict=True)]
        return decoded, acknowledged

    def load_scripts(self) -> None:
        scripts.load_all(self.redis)

    def _head(self, queue: str) -> list[Arg]:
        return [queue_keys(queue).job_prefix, self.events_maxlen]

    # --- producers --------------------------------------------------------------------------------

    def enqueue_call(
        self, queue: str, count: int, may_take_intake: bool, job_args: list[Arg]
    ) -> Call[list[EnqueueResult]]:
        """`count` jobs into one queue; `job_args` holds each job's arguments (see enqueue.lua)."""
        k = queue_keys(queue)

        def results(reply: Any) -> list[EnqueueResult]:
            return [EnqueueResult(job_id, queue, JobState(state), status) for job_id, status, state in reply]

        args = [k.job_prefix, self.events_maxlen, k.inbox_prefix, count, int(may_take_intake), *job_args]
        return Call("enqueue", script_keys("enqueue", queue), args, results)

    def enqueue_one_call(self, queue: str, job_id: str, pairs: Sequence[Arg]) -> Call[int]:
        """One job of the intake kind (see enqueue_one.lua), `pairs` its intake entry's ('task', task, 'priority',
        priority, then the hash's other fields): 1 queued, 2 handed to an idle worker, 0 not taken (nothing
        written: send it to `enqueue_call`)."""
        args = [job_id, queue_keys(queue).inbox_prefix, *pairs]
        return Call("enqueue_one", script_keys("enqueue_one", queue), args, _int)

    def append_intake(
        self,
        queue: str,
        job_id: str,
        pairs: Sequence[Arg],
        *,
        replicas: int = 0,
        timeout_ms: int = 0,
        spin_s: float = 0.0,
    ) -> Appended:
        """One job of the intake kind appended to the queue's intake by a plain XADD (no script: Redis parses its
        arguments once and runs no Lua), `pairs` as for `enqueue_one_call`. The XADD is the whole write, so it
        is atomic alone; the XLEN and ZCARD after it, in the same round trip, tell the caller whether to drain
        the intake (INTAKE_MAX) and whether a worker waiting idle must be woken: a worker registered idle before
        the XADD is counted, and one that registers later does so from a claim that drained this entry first.
        With `replicas`, WAIT in the same round trip (Client's `replicas`). Raises what the XADD raises."""
        k = queue_keys(queue)
        commands: list[list[Arg]] = [
            ["XADD", k.intake, "*", "id", job_id, *pairs],
            ["XLEN", k.intake],
            ["ZCARD", k.idle],
        ]
        if replicas:
            commands.append(["WAIT", replicas, timeout_ms])
        replies = scripts.commands(self.redis, commands, spin_s=spin_s)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return Appended(int(replies[1]), int(replies[2]), int(replies[3]) if replicas else 0)

    def wake_queue(self, queue: str) -> None:
        """Wake one worker waiting on the queue (its blocking pop ends on the wake list and it claims), as
        make_ready in lua/_lib.lua does: a token, the list capped as there."""
        wake = queue_keys(queue).wake
        for reply in scripts.commands(self.redis, [["LPUSH", wake, "1"], ["LTRIM", wake, 0, 999]]):
            if isinstance(reply, Exception):
                raise reply

    def register_queues(self, queues: Iterable[str]) -> None:
        # A plain SADD: Redis refuses it while full, as it refuses the enqueue that follows.
        self.redis.sadd(keys.QUEUES, *queues)

    def ensure_queue(self, queue: str) -> None:
        """Make a queue known (paused before its first job) without writing when it already is, so that it
        works while Redis is full."""
        if not self.redis.sismember(keys.QUEUES, queue):
            self.redis.sadd(keys.QUEUES, queue)

    # --- operators --------------------------------------------------------------------------------

    def drain_call(self, queue: str) -> Call[int]:
        return Call("drain", script_keys("drain", queue), self._head(queue), _int)

    def drain(self, queue: str) -> int:
        """Turn the queue's intake entries into jobs now (drain_intake in lua/_lib.lua); returns how many."""
        return self.run(self.drain_call(queue))

    def cancel_call(self, queue: str, job_id: str, *, ttl_ms: int, stamp: str = "") -> Call[str]:
        """'cancelled', 'requested' (running), 'already' (this stamp was applied before), 'missing' or
        'is:<state>'."""
        return Call("cancel", script_keys("cancel", queue), [*self._head(queue), ttl_ms, job_id, stamp], _str)

    def cancel(self, queue: str, job_id: str, *, ttl_ms: int) -> str:
        return self.run(self.cancel_call(queue, job_id, ttl_ms=ttl_ms))

    def requeue_call(self, queue: str, job_id: str, *, reset_attempts: bool, stamp: str = "") -> Call[str]:
        """'queued', 'already' (this stamp was applied before), 'missing', 'duplicate' or 'is:<state>'."""
        args = [*self._head(queue), job_id, int(reset_attempts), stamp]
        return Call("requeue", script_keys("requeue", queue), args, _str)

    def requeue(self, queue: str, job_id: str, *, reset_attempts: bool) -> str:
        return self.run(self.requeue_call(queue, job_id, reset_attempts=reset_attempts))

    def delete_call(self, queue: str, job_id: str, *, expected_state: str = "") -> Call[str]:
        """'deleted', 'missing' or 'is:<state>' (running, or not `expected_state` when one is given)."""
        return Call("delete", script_keys("delete", queue), [*self._head(queue), job_id, expected_state], _str)

    def delete(self, queue: str, job_id: str) -> str:
        return self.run(self.delete_call(queue, job_id))

    def delete_unique(self, queue: str, unique_key: str) -> tuple[str, str]:
        """Delete the waiting job holding `unique_key` (lua/delete_unique.lua): (status, job id)."""
        args = [*self._head(queue), unique_key]
        return self.run(Call("delete_unique", script_keys("delete_unique", queue), args, _pair))

    def unique_holder(self, queue: str, unique_key: str) -> str | None:
        """The id of the live job holding `unique_key` in `queue`, or None."""
        self.drain(queue)
        return cast(str | None, self.redis.hget(queue_keys(queue).unique, unique_key))

    def resubmit_call(
        self, queue: str, jobs: Sequence[tuple[str, int | None, int | None]], *, stamp: str, reset_attempts: bool
    ) -> Call[list[str]]:
        """Resubmit dead jobs given as (id, expected attempts or None, run-at ms or None), compare-and-set and once
        per stamp (lua/resubmit.lua); per job 'queued', 'scheduled', 'already', 'missing', 'duplicate' or
        'conflict:<state>'."""
        args: list[Arg] = [*self._head(queue), stamp, int(reset_attempts), len(jobs)]
        for job_id, attempts, run_at_ms in jobs:
            args += [job_id, "" if attempts is None else attempts, "" if run_at_ms is None else run_at_ms]
        return Call("resubmit", script_keys("resubmit", queue), args, _strings)

    def edit_call(
        self,
        queue: str,
        job_id: str,
        *,
        expected_state: str,
        expected_attempts: int | None = None,
        priority: int | None = None,
        run_at_ms: int | None = None,
        params_json: str | None = None,
        resubmit: bool = False,
        reset_attempts: bool = False,
        stamp: str = "",
    ) -> Call[Edited]:
        """Compare-and-set edit (lua/edit.lua). `stamp`: a bulk operation's id, making the edit idempotent."""

        def unset(value: Arg | None) -> Arg:
            return "" if value is None else value

        args = [
            *self._head(queue), job_id, expected_state, unset(expected_attempts), unset(priority), unset(run_at_ms),
            unset(params_json), int(resubmit), int(reset_attempts), stamp,
        ]  # fmt: skip
        return Call("edit", script_keys("edit", queue), args, lambda r: Edited(str(r[0]), str(r[1])))

    def edit(
        self,
        queue: str,
        job_id: str,
        *,
        expected_state: str,
        expected_attempts: int | None,
        priority: int | None,
        run_at_ms: int | None,
        params_json: str | None,
        resubmit: bool,
        reset_attempts: bool,
    ) -> Edited:
        call = self.edit_call(
            queue, job_id, expected_state=expected_state, expected_attempts=expected_attempts, priority=priority,
            run_at_ms=run_at_ms, params_json=params_json, resubmit=resubmit, reset_attempts=reset_attempts,
        )  # fmt: skip
        return self.run(call)

    # --- jobs that wait for other jobs (core/workflows.py, lua/_deps.lua) ----------------------------

    def workflow_call(
        self, home: str, workflow_id: str, *, name: str, keep_ms: int, count: int, blocks: Sequence[Arg]
    ) -> Call[list[str]]:
        """Create `count` jobs and their edges in one step (lua/workflow.lua); `workflow_id` '' for a depends_on
        enqueue (no record). The raw reply: ['created', state...], ['exists'], ['taken', id] or
        ['missing', parent ref, id]."""
        named = {"wf_record": queue_keys(home).workflow(workflow_id)}
        args: list[Arg] = [workflow_id, name, self.events_maxlen, home, keep_ms, count, "", *blocks]
        return Call("workflow", _fill("workflow", None, named), args, _strings)

    def workflow_restore_call(self, home: str, workflow_id: str, args: Sequence[Arg]) -> Call[list[str]]:
        """Put back waiting jobs Redis lost, with their edges and their workflow's record (lua/workflow_restore.lua,
        core/restoring.py): per job its state now, '' for one Redis held already."""
        named = {"wf_record": queue_keys(home).workflow(workflow_id)}
        args = [workflow_id, args[0], self.events_maxlen, *args[1:]]
        return Call("workflow_restore", _fill("workflow_restore", None, named), args, _strings)

    def workflow_part_call(
        self, queue: str, workflow_id: str, *, home: str, count: int, blocks: Sequence[Arg],
        remote_parents: Sequence[str], remote_links: Sequence[tuple[str, str]],
    ) -> Call[list[str]]:  # fmt: skip
        """Cluster: one queue's part of a workflow that spans slots (workflow.lua 'part'): its roots held until
        `workflow_parts('open')`. `remote_parents`: refs of members in other queues its jobs wait for;
        `remote_links`: (parent id here, child ref there). Reply as workflow_call's, or ['placed'] (a repeat)."""
        named = {"wf_record": queue_keys(queue).workflow(workflow_id)}  # never written: it names the slot
        args: list[Arg] = [workflow_id, "", self.events_maxlen, home, 0, count, "part", *blocks]
        args += [len(remote_parents), *remote_parents, len(remote_links), *chain.from_iterable(remote_links)]
        return Call("workflow", _fill("workflow", None, named), args, _strings)

    def workflow_parts(self, op: str, queue: str, workflow_id: str, *args: Arg) -> Any:
        """Cluster: a step of a workflow spanning slots (lua/workflow_parts.lua): begin, commit, abort, done in the
        home queue's slot; open, unplace in a member queue's."""
        if op in ("open", "unplace"):
            args = (self.events_maxlen, *args)
        keys = _fill("workflow_parts", queue_keys(queue), {"wf_record": queue_keys(queue).workflow(workflow_id)})
        return self.run(Call("workflow_parts", keys, [op, workflow_id, *args], _raw))

    def creations_due(self, queue: str, limit: int = 100) -> list[str]:
        """Cluster: ids of workflows whose home is this queue and whose creation is past its deadline."""
        return [str(i) for i in self.redis.zrange(queue_keys(queue).wf_creating, "-inf", self.time_ms(),
                                                  byscore=True, offset=0, num=limit)]  # fmt: skip

    def relay_call(self, op: str, queue: str, *args: Arg) -> Call[Any]:
        """Cluster: a step of the cross-slot outbox (lua/deps_relay.lua): 'due' and 'ack' in the parent's queue,
        'apply' in the child's."""
        if op == "apply":
            args = (self.events_maxlen, *args)
        return Call("deps_relay", script_keys("deps_relay", queue), [op, *args], _raw)

    def workflow_cancel(
        self, home: str, workflow_id: str, *, ttl_ms: int, mode: str = "", job_ids: Sequence[str] = ()
    ) -> tuple[int, int]:
        """Cancel a workflow's members not started, ask its running ones to stop: (cancelled, asked); (-1, 0) when
        the workflow is unknown. Cluster, a workflow spanning slots: mode 'mark' records the cancel on the record
        only; 'part' cancels `job_ids` of queue `home` (lua/workflow_cancel.lua)."""
        named = {"wf_record": queue_keys(home).workflow(workflow_id)}
        args: list[Arg] = [self.events_maxlen, ttl_ms, mode, *job_ids]
        reply = self.run(Call("workflow_cancel", _fill("workflow_cancel", None, named), args, _ints))
        return reply[0], reply[1]

    def set_paused(self, queue: str, paused: bool) -> bool:
        """True when the queue's state changed."""
        args = [self.events_maxlen, int(paused)]
        return self.run(Call("set_paused", script_keys("set_paused", queue), args, _bool))

    # --- workers ----------------------------------------------------------------------------------

    def claim_call(
        self,
        queue: str,
        worker: WorkerIdentity,
        count: int,
        *,
        idle_ms: int,
        acks: Sequence[tuple[str, str, str, int]] = (),
        ttl_ms: int = 0,
    ) -> Call[Claimed]:
        """Up to `count` jobs under fresh leases (jobs handed to the worker's inbox first); when the queue runs
        dry, register the worker as idle for `idle_ms` (0: do not). `acks` (as complete_call's, for this queue's
        jobs) are applied first, in the same script: their answers are the reply's `acks`."""
        args: list[Arg] = [*self._head(queue), count, worker.id, worker.host, worker.pid, worker.idle_member, idle_ms]
        if acks:
            args += [ttl_ms, len(acks), *_flat(acks)]
        return Call("claim", script_keys("claim", queue, worker.id), args, _claimed)

    # --- concurrency groups and queue limits (docs/concepts.md) -------------------------------------

    def define_group(self, group: str, *, connections: int, requests: int, period_ms: int) -> None:
        """Set a concurrency group's limits (0: none), atomically, and list it."""
        pipe = self.redis.pipeline(transaction=not self.cluster)  # two slots in a cluster: conf first
        conf = group_keys(group).conf
        pipe.hset(conf, mapping={"connections": connections, "requests": requests, "period_ms": period_ms})
        pipe.sadd(keys.GROUPS, group)
        pipe.execute()

    def touch_groups(self) -> int:
        """Tick every concurrency group (the maintenance leader, every pass): lua/group_touch.lua."""
        groups = sorted(cast(set[str], self.redis.smembers(keys.GROUPS)))
        if groups:
            self.run_many([Call("group_touch", group_script_keys("group_touch", g), [], _int) for g in groups])
        return len(groups)

    def group_acquire(self, group: str, count: int, *, holder: str, lease_ms: int, queue: str) -> SlotGrant:
        """Up to `count` of the group's slots, leased for `lease_ms`; short, `queue` is woken by a release."""
        args: list[Arg] = [count, holder, lease_ms, queue]
        return self.run(Call("group_acquire", group_script_keys("group_acquire", group), args, _group_slots))

    def group_release_call(self, group: str, tokens: Sequence[str], *, unused: bool) -> Call[list[str]]:
        """Give slots back; the queues waiting for one come back (to be woken with `wake`)."""
        args: list[Arg] = [int(unused), *tokens]
        return Call("group_release", group_script_keys("group_release", group), args, _strings)

    def group_renew_call(self, group: str, tokens: Sequence[str], *, lease_ms: int) -> Call[int]:
        return Call("group_renew", group_script_keys("group_renew", group), [lease_ms, *tokens], _int)

    def claim_group_call(self, queue: str, group: str, worker: WorkerIdentity, count: int) -> Call[Claimed]:
        """Up to `count` of the queue's jobs held for `group`, for a worker holding that many of its slots."""
        args = [*self._head(queue), group, count, worker.id, worker.host, worker.pid]
        return Call("claim_group", script_keys("claim_group", queue), args, _group_claimed)

    def wake(self, queues: Iterable[str]) -> None:
        """A token on each queue's wake list: a worker blocked there claims again."""
        pipe = self.redis.pipeline(transaction=False)
        for queue in queues:
            pipe.lpush(queue_keys(queue).wake, "1")
            pipe.ltrim(queue_keys(queue).wake, 0, 999)
        pipe.execute()

    def set_queue_limit(self, queue: str, limit: int | None) -> None:
        """At most `limit` jobs of `queue` running at once across all workers (None: no limit)."""
        if limit is None:
            self.redis.delete(queue_keys(queue).limit)
            return
        pipe = self.redis.pipeline(transaction=not self.cluster)  # two slots in a cluster: limit first
        pipe.set(queue_keys(queue).limit, limit)
        pipe.sadd(keys.QUEUES, queue)
        pipe.execute()

    def complete_call(self, queue: str, acks: Sequence[tuple[str, str, str, int]], *, ttl_ms: int) -> Call[list[int]]:
        """Acks as (job id, token, result JSON, runtime ms); an `Ack` per job."""
        args: list[Arg] = [*self._head(queue), ttl_ms, len(acks), *_flat(acks)]
        return Call("complete", script_keys("complete", queue), args, _ints)

    def fail_call(
        self,
        queue: str,
        job_id: str,
        token: str,
        *,
        outcome: str,
        retry: bool,
        delay_ms: int,
        error: dict[str, Any],
        runtime_ms: int,
        ttl_ms: int,
    ) -> Call[Failed]:
        args = [
            *self._head(queue), ttl_ms, job_id, token, outcome, int(retry), delay_ms, json.dumps(error), runtime_ms,
        ]  # fmt: skip
        return Call("fail", script_keys("fail", queue), args, _failed)

    def release_call(self, queue: str, job_id: str, token: str, reason: str, *, drop: bool = False) -> Call[bool]:
        """Give a running job back without using an attempt: requeued, or set aside as dropped."""
        args = [*self._head(queue), job_id, token, reason, "drop" if drop else "requeue"]
        return Call("release", script_keys("release", queue), args, _bool)

    def replace_call(
        self, queue: str, job_id: str, token: str, args: "ReplaceArgs", result_json: str, *, ttl_ms: int
    ) -> Call[int]:
        """Run a running job again later with a new state (Runqueue's replace): lua/replace.lua. 1 replaced,
        2 cancelled as an operator asked meanwhile, 0 stale token."""
        values: list[Arg] = [
            job_id, token, args.params_json, args.priority, args.delay_ms, args.run_at_ms, result_json, ttl_ms,
        ]  # fmt: skip
        return Call("replace", script_keys("replace", queue), [*self._head(queue), *values], _int)

    def heartbeat_call(self, queue: str, beats: Sequence[tuple[str, str, str, str]]) -> Call[list[int]]:
        """Beats as (job id, token, progress or '', checkpoint JSON or ''); a `Beat` per job."""
        args: list[Arg] = [*self._head(queue), len(beats), *_flat(beats)]
        return Call("heartbeat", script_keys("heartbeat", queue), args, _ints)

    def release_orphans(self, queue: str, worker: WorkerIdentity, held: Sequence[str]) -> list[str]:
        """Drop the worker's idle registration and inbox, and give back the jobs leased to it that it does not
        hold (`held`); returns their ids."""
        args = [*self._head(queue), worker.id, worker.idle_member, *held]
        return self.run(Call("release_orphans", script_keys("release_orphans", queue, worker.id), args, _strings))

    def wait_for_work(self, worker: WorkerIdentity, queues: Sequence[str], timeout: float) -> Handed | None:
        """Block until a job is handed to the worker's inbox on one of `queues`, or one is enqueued there."""
        watched = _watched(worker.id, tuple(queues))
        if self.cluster:  # one blocking pop per queue (slot), in threads: cluster.py
            popped = cluster.blpop_any(cast(Any, self.redis), cluster.by_slot(list(watched)), timeout)
        else:
            popped = self.redis.blpop(list(watched), timeout=timeout)
        if popped is None:
            return None
        queue, is_inbox = watched[str(popped[0])]
        if not is_inbox:
            return Handed(queue, None)
        if popped[1] == WAKE_TOKEN:  # wake_waiting(): nothing to do, the pop just ends
            return None
        return Handed(queue, decode_lease(json.loads(popped[1])))

    def wake_waiting(self, worker: WorkerIdentity, queue: str) -> None:
        """End the worker's own blocking wait_for_work at once (it returns None), rather than at its timeout: a
        token pushed to its inbox on `queue` (one of those it waits on)."""
        # A token left over (the wait had ended already) is dropped by the next claim, release_orphans or takeback,
        # all of which read or delete the inbox; claim.lua decodes it as a lease whose job does not exist.
        inbox = queue_keys(queue).inbox(worker.id)
        pipe = self.redis.pipeline(transaction=not self.cluster)  # as elsewhere: MULTI but on a cluster client
        pipe.rpush(inbox, WAKE_TOKEN)
        pipe.pexpire(inbox, 60000)  # as enqueue.lua's hand-off: a worker that died leaves no inbox for long
        pipe.execute()

    def clear_inboxes(self, worker_id: str, queues: Sequence[str]) -> None:
        """A worker starting under a name an earlier process used: jobs in those inboxes hold stale leases."""
        self.redis.delete(*(queue_keys(q).inbox(worker_id) for q in queues))

    def announce(self, queues: Sequence[str], task_options: dict[str, str]) -> None:
        """A worker starting: its queues become known, its tasks' options listed for the console."""
        options = [item for pair in task_options.items() for item in pair]
        self.run(Call("announce", _fill("announce", None, {}), [len(queues), *queues, *options], _int))

    def register_worker(self, worker_id: str, *, ttl_s: int, now_ms: int, info: dict[str, Arg]) -> str | None:
        """Write the worker's registry hash; returns the operator's control of it ('quiet', 'stop' or ''), or None
        when its id was declared gone (nothing written)."""
        fields = [item for pair in info.items() for item in pair]
        named = {"worker": keys.worker_key(worker_id)}
        return self.run(
            Call(
                "register_worker", _fill("register_worker", None, named), [worker_id, ttl_s, now_ms, *fields],
                _optional_str,
            )
        )  # fmt: skip

    def control_worker_call(self, worker_id: str, action: str) -> Call[str]:
        """An operator's 'quiet', 'stop' or 'resume' of a live worker (worker_control.lua): 'done', 'already' or
        'missing'."""
        named = {"worker": keys.worker_key(worker_id)}
        return Call("worker_control", _fill("worker_control", None, named), [action], _str)

    def clear_worker_control(self, worker_id: str) -> None:
        """A worker starting under a name an earlier process used: that process's quiet or stop is not for it."""
        self.redis.hdel(keys.worker_key(worker_id), "control")

    def worker_beat(self, worker_id: str, *, expiry_ms: int) -> bool:
        """A worker process's heartbeat: alive until now + `expiry_ms`; False when its id was declared gone."""
        return self.run(Call("worker_beat", _fill("worker_beat", None, {}), [worker_id, expiry_ms], _bool))

    def unregister_worker(self, worker_id: str) -> None:
        # No MULTI: Redis refuses every command queued in one while it is full, and none needs it: a worker
        # leaving alive's deadlines first is never declared gone (lapse.lua), whatever comes after.
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrem(keys.ALIVE, worker_id)
        pipe.delete(keys.worker_key(worker_id))
        pipe.zrem(keys.WORKERS, worker_id)
        pipe.execute()

    def time_ms(self) -> int:
        """Redis's clock: every deadline is counted in it, never in a host's."""
        seconds, micros = self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    # --- maintenance ------------------------------------------------------------------------------

    def acquire_lock(self, name: str, token: str, ttl_ms: int) -> bool:
        """Take or renew the owner-token lock `name` ('maintenance', 'mirror')."""
        return self.run(Call("lock", [keys.lock_key(name)], ["acquire", token, ttl_ms], _bool))

    def release_lock(self, name: str, token: str) -> bool:
        return self.run(Call("lock", [keys.lock_key(name)], ["release", token, 0], _bool))

    def recover(self, queue: str, *, limit: int, outage_ms: int, ttl_ms: int) -> Recovered:
        """Requeue or dead-letter up to `limit` jobs whose lease expired (outage_ms: see recover.lua)."""
        args = [*self._head(queue), ttl_ms, limit, outage_ms]
        return self.run(Call("recover", script_keys("recover", queue), args, _recovered))

    def lapse_workers(
        self, *, limit: int, keep_ms: int, keep: int, silence_ms: int, spare_ms: int, stale_ms: int
    ) -> list[Lapsed]:
        """Declare gone the workers whose process heartbeat lapsed; returns those whose jobs to take back (see
        lapse.lua), then `take_back_call` per queue and `taken_back`."""
        args: list[Arg] = ["scan", WORKER_PREFIX, limit, keep_ms, keep, silence_ms, spare_ms, stale_ms]
        reply = self.run(Call("lapse", _fill("lapse", None, {}), args, _strings))
        return [
            Lapsed(reply[i], [q for q in reply[i + 1].split(",") if q], int(reply[i + 2]), int(reply[i + 3]))
            for i in range(0, len(reply), 4)
        ]

    def take_back_call(self, queue: str, worker_id: str, *, last_beat_ms: int, ttl_ms: int) -> Call[Recovered]:
        """Every running job of `queue` leased to `worker_id` taken back at once (takeback.lua)."""
        args = [*self._head(queue), ttl_ms, worker_id, last_beat_ms]
        return Call("takeback", script_keys("takeback", queue, worker_id), args, _recovered)

    def slots_held_by(self, holder: str) -> dict[str, list[str]]:
        """The concurrency-group slots `holder` holds (group -> tokens), for a worker declared gone: a token is
        '<holder>:<number>' (group_acquire.lua)."""
        groups = sorted(cast(set[str], self.redis.smembers(keys.GROUPS)))
        if not groups:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        for group in groups:
            pipe.zrange(group_keys(group).slots, 0, -1)
        head = holder + ":"
        held = {
            group: [t for t in tokens if t.startswith(head) and t[len(head) :].isdigit()]
            for group, tokens in zip(groups, pipe.execute(), strict=True)
        }
        return {group: tokens for group, tokens in held.items() if tokens}

    def taken_back(self, worker_id: str, count: int) -> None:
        """The worker's jobs were taken back from every queue: it leaves `taking`, its record counts them."""
        self.run(Call("lapse", _fill("lapse", None, {}), ["done", WORKER_PREFIX, worker_id, count], _int))

    def promote(self, queue: str, *, limit: int) -> int:
        """Drain the intake, then move up to `limit` due scheduled jobs to the ready set."""
        return self.run(Call("promote", script_keys("promote", queue), [*self._head(queue), limit], _int))

    def trim(self, queue: str, state: JobState, *, age_ms: int, limit: int) -> int:
        """Forget up to `limit` jobs that finished in `state` more than `age_ms` ago."""
        k = queue_keys(queue)
        named = {"finished": k.state_set(state)}
        args = [*self._head(queue), age_ms, limit]
        return self.run(Call("trim", _fill("trim", k, named), args, _int))

    def gauges_call(self, queue: str, *, grace_ms: int) -> Call[list[int]]:
        """The raw reply of gauges.lua (read only): `queries.queues.gauges` decodes it."""
        return Call("gauges", script_keys("gauges", queue), [queue_keys(queue).job_prefix, grace_ms], _ints)

    def trim_stats(self, queue: str, before_minute: int) -> int:
        """Forget per-minute counters of minutes before `before_minute`."""
        stats = queue_keys(queue).stats
        stale = [f for f in cast(list[str], self.redis.hkeys(stats)) if int(f.split("|", 1)[0]) < before_minute]
        for start in range(0, len(stale), 1000):
            self.redis.hdel(stats, *stale[start : start + 1000])
        return len(stale)

    def prune_workers(self) -> list[str]:
        """Forget registry entries whose hash expired (their workers died without saying so)."""
        ids = cast(list[str], self.redis.zrange(keys.WORKERS, 0, -1))
        if not ids:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for worker_id in ids:
            pipe.exists(keys.worker_key(worker_id))
        gone = [w for w, alive in zip(ids, pipe.execute(), strict=True) if not alive]
        if gone:
            self.redis.zrem(keys.WORKERS, *gone)
        return gone

    # --- periodic jobs (periodic.py, periodic.lua) --------------------------------------------------

    def _periodic(self, op: str, name: str, *args: Arg) -> Call[Any]:
        periodic_keys = [keys.PERIODIC_HANDLED, keys.PERIODIC_PENDING, keys.PERIODIC_LAST]
        return Call("periodic", periodic_keys, [op, name, *args], lambda r: r)

    def periodic_advance(self, name: str, *, expected_ms: int | None, new_ms: int, job_id: str, slot_ms: int) -> str:
        """Move a schedule's handled mark by compare-and-set: 'ok', 'stale' or 'early' (see periodic.lua)."""
        expected = "" if expected_ms is None else expected_ms
        return _str(self.run(self._periodic("advance", name, expected, new_ms, job_id, slot_ms)))

    def periodic_confirm(self, name: str, job_id: str) -> bool:
        return _bool(self.run(self._periodic("confirm", name, job_id)))

    def periodic_forget(self, name: str) -> None:
        self.run(self._periodic("forget", name))

    def periodic_records(self, names: Sequence[str]) -> dict[str, SlotRecord]:
        """Each schedule's bookkeeping, in one round trip."""
        if not names:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        for key in (keys.PERIODIC_HANDLED, keys.PERIODIC_PENDING, keys.PERIODIC_LAST):
            pipe.hmget(key, list(names))
        handled, pending, last = pipe.execute()
        records: dict[str, SlotRecord] = {}
        for name, handled_ms, pending_value, last_value in zip(names, handled, pending, last, strict=True):
            pending_job, pending_slot, since = (pending_value or "||").split("|", 2)
            last_slot, last_job, fired = (last_value or "||").split("|", 2)
            records[name] = SlotRecord(
                handled_ms=int(handled_ms) if handled_ms else None,
                pending_job=pending_job,
                pending_slot_ms=int(pending_slot) if pending_slot else 0,
                pending_since_ms=int(since) if since else 0,
                last_slot_ms=int(last_slot) if last_slot else None,
                last_job=last_job,
                last_fired_ms=int(fired) if fired else None,
            )
        return records

    # --- the database mirror's feed (feed.py) -------------------------------------------------------

    def mirror_read(self, queues: Sequence[str], *, group: str, consumer: str, count: int, pending: bool) -> Any:
        """The raw reply of mirror_read.lua (feed.py decodes it)."""
        if self.cluster:
            return self._mirror_read_by_queue(queues, group=group, consumer=consumer, count=count, pending=pending)
        streams = [queue_keys(q).events for q in queues]
        args: list[Arg] = [group, consumer, count, "0" if pending else ">"]
        return self.run(Call("mirror_read", [keys.REDIS_EPOCH, *streams], args, lambda r: r))

    def _mirror_read_by_queue(
        self, queues: Sequence[str], *, group: str, consumer: str, count: int, pending: bool
    ) -> Any:
        """mirror_read in a cluster, where the streams are in different slots: the epoch counted up first, then
        one mirror_read.lua per queue (its KEYS[1] a counter in the queue's own slot), all in one round trip per
        node; the replies put together as one (COUNT is per stream in either case)."""
        args: list[Arg] = [group, consumer, count, "0" if pending else ">"]
        calls: list[Call[Any]] = [Call("mirror_epoch", [keys.REDIS_EPOCH], [], _int)]
        for q in queues:
            k = queue_keys(q)
            calls.append(
                Call("mirror_read", [k.job_prefix.removesuffix("job:") + "epoch", k.events], args, lambda r: r)
            )
        epoch, *replies = self.run_many(calls)
        infos: list[Any] = []
        entries: list[Any] | None = None
        missing = False
        for reply in [epoch, *replies]:
            if isinstance(reply, Exception):
                raise reply
        for _queue_epoch, info, read in replies:
            infos += info
            missing = missing or read == 0  # a stream or the group is missing: feed.py reads nothing then
            if read:
                entries = [*(entries or []), *read]
        return [epoch, infos, 0 if missing else entries]

    def mirror_group(self, queue: str, *, group: str, start: str, recreate: bool) -> bool:
        args: list[Arg] = [group, start, int(recreate)]
        return self.run(Call("mirror_group", script_keys("mirror_group", queue), args, _bool))

    def mirror_epoch(self, to: int | None = None) -> int:
        return self.run(Call("mirror_epoch", [keys.REDIS_EPOCH], [] if to is None else [to], _int))


@cache
def _watched(worker_id: str, queues: tuple[str, ...]) -> dict[str, tuple[str, bool]]:
    """The lists a waiting worker blocks on, inboxes first: key -> (queue, is its inbox)."""
    watched = {queue_keys(q).inbox(worker_id): (q, True) for q in queues}
    watched |= {queue_keys(q).wake: (q, False) for q in queues}
    return watched
