"""The chaos scenario `cluster_workflows`: the `workflows` scenario's graphs (a chain, a chord of hundreds, nested
groups, a diamond) on a Redis Cluster (3 primaries, a replica each, tests/cluster_servers.py) with their steps
spread over three queues, one on each primary, so that most links cross slots: a parent's end reaches a dependent
in another slot through its queue's outbox, relayed by the recoverer (docs/architecture.md, "Crossing slots").
Workers and one of the two recoverers (the leader relays) are SIGKILLed in turn; under load the primary owning the
chaos queue is SIGKILLed and its replica promoted (the full run then does the same to the second queue's primary),
the dead node restarted as a replica.

A workflow counts as accepted once every primary holding its queues has a replica acknowledging what it wrote
(a write and WAIT on each, after the creation): replication is asynchronous, and a creation acknowledged but not
replicated may be lost with its primary. Gates: those of `workflows` (each dependent released once, none started
before its parents' runs ended, none left waiting, every workflow created) and every failover happened."""

import itertools
import threading
import time
from pathlib import Path

import redis

from chaos.cluster_failover import _ClusterURL, fail_over
from chaos.harness import Ctx
from chaos.tasks import QUEUE
from jobconsole.core import Client
from jobconsole.core.connection import connect
from jobconsole.core.keys import queue_keys
from tests.cluster_servers import ClusterSetup

RECOVERER_START_S = 10.0  # a recoverer is killed only while the other one has been up this long (Django's start
# takes seconds on the loaded 2-core machine: killing both in a row leaves no recoverer at all meanwhile)
CLUSTER_WORKFLOW_GATES = ("released_twice", "started_early", "left_waiting", "workflows_not_created",
                          "failovers_missed")  # fmt: skip


def queues_on_every_primary(setup: ClusterSetup) -> list[str]:
    """The chaos queue and one more queue on each other primary."""
    nodes = {setup.node_of(queue_keys(QUEUE).ready).name: QUEUE}
    for i in itertools.count():
        if len(nodes) == len(setup.primaries()):
            return list(nodes.values())
        nodes.setdefault(setup.node_of(queue_keys(f"{QUEUE}.{i}").ready).name, f"{QUEUE}.{i}")
    raise AssertionError("unreachable")


def replicated(setup: ClusterSetup, queues: list[str], timeout: float = 30) -> None:
    """Every primary holding `queues` has a replica with all it wrote so far: a write, then WAIT, on one connection
    (WAIT counts the replicas that have that connection's last write, and the replication stream is in order).
    A connection error when none does by `timeout`: the creator then sends the workflow again (same id)."""
    deadline = time.monotonic() + timeout
    for queue in queues:
        while True:
            try:
                pipe = setup.node_of(queue_keys(queue).ready).client().pipeline(transaction=False)
                pipe.set(queue_keys(queue).base("replication-probe"), 1, px=10_000)
                pipe.wait(1, 500)
                if int(pipe.execute()[-1]) >= 1:
                    break
            except (redis.RedisError, LookupError):
                pass
            if time.monotonic() > deadline:
                raise redis.ConnectionError(f"no replica acknowledged the writes to {queue}")
            time.sleep(0.1)


def cluster_workflows(ctx: Ctx) -> None:
    from chaos.scenarios import WorkflowBook  # scenarios.py imports this module

    setup = ClusterSetup(Path(ctx.workdir) / "cluster").start()
    ctx.cleanups.append(setup.stop)
    ctx.cluster.redis = _ClusterURL(setup.url)  # type: ignore[assignment]  # workers and the recoverer use it
    ctx.r = connect(setup.url)
    ctx.client = Client(ctx.r)
    queues = queues_on_every_primary(setup)
    ctx.cluster.queues = tuple(queues)
    ctx.notes.append("queues " + ", ".join(f"{q} on {setup.node_of(queue_keys(q).ready).name}" for q in queues))
    recoverers = [ctx.cluster.start_recoverer(), ctx.cluster.start_recoverer()]  # one leads, the other waits
    started = [time.monotonic()] * 2
    ctx.workers(3)
    book = WorkflowBook(ctx, queues, accepted=lambda: replicated(setup, queues))
    count = int(ctx.size(4, 10))
    creator = threading.Thread(target=book.create_paced, args=(count,))
    creator.start()
    victims = [QUEUE] if ctx.quick else [QUEUE, queues[1]]
    missed = 0
    for done in itertools.count():
        if not (creator.is_alive() or done < 3 or victims or not ctx.tallies.get("recoverers_killed")):
            break
        ctx.sleep(0.4, 1.2)
        if victims and done % 3 == 2:
            missed += not fail_over(ctx, setup, queue_keys(victims.pop(0)).ready)
        elif done % 3 == 1 and time.monotonic() - started[1 - (slot := done // 3 % 2)] > RECOVERER_START_S:
            # A relayer, between any two of its steps; the other one, up for a while, takes the lock within 3 s.
            ctx.cluster.kill(recoverers[slot])
            recoverers[slot], started[slot] = ctx.cluster.start_recoverer(), time.monotonic()
            ctx.tallies["recoverers_killed"] = ctx.tallies.get("recoverers_killed", 0) + 1
        else:
            ctx.kill_a_worker()
    creator.join()
    book.judge(count)
    ctx.tallies["failovers_missed"] = missed
    ctx.tallies["cross_slot_links"] = sum(
        1 for child, ups in book.parents.items() for p in ups if book.queue_of[child] != book.queue_of[p]
    )
