"""The chaos scenario `cluster_failover`: the engine on a Redis Cluster (3 primaries, a replica each, on loopback,
tests/cluster_servers.py), three workers and a recoverer on it, producers enqueuing plain and concurrency-group
jobs; under load the primary that owns the chaos queue's slot is SIGKILLed, its replica promoted (cluster-node-
timeout 1 s), and the dead node restarted to rejoin as the new primary's replica. The full run then does the
same to the primary owning the group's slot ({g:chaos.ext}, on another node).

The producers enqueue with `replicas=1` (WAIT 1 in the same round trip): replication is asynchronous, so a
write a primary acknowledged but had not yet sent on is gone after a failover (as with Sentinel); a job counts
as accepted only once a replica has it, and a send a replica did not acknowledge (NotReplicated, e.g. while
the promoted primary has no replica yet) is sent again with the same ids, like any failed send. Gates, besides
the usual ones (nothing accepted lost, no overlapping leases, no orphans): the group's runs at once under
valid leases never pass its limit, and no group slot is left held once the queue drained."""

import time
from pathlib import Path
from typing import Any

import redis

from chaos.harness import Ctx, work
from chaos.tasks import GROUP, LEASE_S, QUEUE
from jobconsole.core import Client, NotReplicated
from jobconsole.core.connection import connect
from jobconsole.core.groups import Group
from jobconsole.core.keys import group_keys, queue_keys
from jobconsole.core.store import Store
from tests.cluster_servers import ClusterSetup

GROUP_LIMIT = 3
CLUSTER_GATES = ("group_over_limit", "group_slots_leaked", "failovers_missed")


class ReplicatedClient(Client):
    """A batch that a replica did not acknowledge is sent again with the same ids (harmless: the jobs that exist
    are reported as such) until one does; only then does the producer book it as accepted, with the time of its
    first send (a worker may have started a job the primary took before the replica had it). After 30 s of that
    it gives up with a connection error, which makes the producer send the batch again later."""

    def enqueue_many(self, specs: Any, batch_size: int = 1000) -> Any:
        specs = list(specs)
        deadline = time.monotonic() + 30
        while True:
            try:
                return super().enqueue_many(specs, batch_size)
            except NotReplicated as exc:
                if time.monotonic() > deadline:
                    raise redis.ConnectionError(f"not replicated: {exc}") from exc
                time.sleep(0.05)


class _ClusterURL:
    """Stands in for the scenario's single redis-server where chaos/cluster.py reads its URL."""

    def __init__(self, url: str) -> None:
        self.url = url


def fail_over(ctx: Ctx, setup: ClusterSetup, key: str) -> bool:
    """SIGKILL the primary owning `key` now, wait for its replica's promotion, restart it (it rejoins as the new
    primary's replica: its nodes.conf says so). False, and a note, when the failover did not happen."""
    from chaos.scenarios import _wait  # scenarios.py imports this module

    victim = setup.node_of(key)
    started = time.time()
    try:
        setup.kill_and_wait_failover(victim, timeout=30)
    except (RuntimeError, LookupError) as exc:
        ctx.notes.append(f"failover of {victim.name} did not happen: {exc}"[:300])
        return False
    ctx.ledger.fault("cluster_failover", [], started, time.time())
    ctx.notes.append(f"{victim.name} killed; its replica took over in {time.time() - started:.1f}s")
    victim.start(setup._args(victim))
    _wait(setup.healthy, 30)
    return True


def cluster_failover(ctx: Ctx) -> None:
    from chaos.scenarios import _peaks_at_once, _wait  # scenarios.py imports this module

    setup = ClusterSetup(Path(ctx.workdir) / "cluster").start()
    ctx.cleanups.append(setup.stop)
    url = setup.url
    ctx.cluster.redis = _ClusterURL(url)  # type: ignore[assignment]  # workers and the recoverer use it
    ctx.r = connect(url)
    ctx.client = ReplicatedClient(ctx.r, replicas=1, replicas_timeout=0.5)
    ctx.client.define_group(Group(GROUP, connections=GROUP_LIMIT))
    ctx.cluster.start_recoverer()
    ctx.workers(3)
    queue_node = setup.node_of(queue_keys(QUEUE).ready)
    group_node = setup.node_of(group_keys(GROUP).slots)
    ctx.notes.append(f"queue {QUEUE} on {queue_node.name}, group {GROUP} on {group_node.name}")
    n = int(ctx.size(500, 4000))
    plan = [
        work(f"c{i}", ctx.rng.choice([0.01, 0.05]), task="chaos.grouped")
        if i % 3 == 0
        else work(f"c{i}", ctx.rng.choice([0.0, 0.0, 0.01, 0.1]))
        for i in range(n)
    ]
    rate = ctx.size(100, 100)
    ctx.produce(plan[::2], rate=rate / 2, batch=10)
    ctx.produce(plan[1::2], rate=rate / 2, batch=10)
    owners = [queue_keys(QUEUE).ready] if ctx.quick else [queue_keys(QUEUE).ready, group_keys(GROUP).slots]
    missed = 0
    for key in owners:
        ctx.sleep(1.0, 2.0)
        if not fail_over(ctx, setup, key):
            missed += 1
            break
    ctx.settle(timeout=120)
    grouped = [p.spec.id for p in plan if p.spec.task == "chaos.grouped" and p.spec.id]
    valid, raw = _peaks_at_once(ctx, grouped)
    slots = group_keys(GROUP).slots
    _wait(lambda: ctx.r.zcount(slots, Store(ctx.r).time_ms(), "+inf") == 0, 10 * LEASE_S)
    ctx.tallies |= {
        "group_peak": valid,
        "group_over_limit": max(0, valid - GROUP_LIMIT),
        "group_slots_leaked": int(ctx.r.zcount(slots, Store(ctx.r).time_ms(), "+inf")),
        "failovers_missed": missed,
    }
    ctx.notes.append(f"group {GROUP}: peak {valid} at once under valid leases, {raw} with zombies")
