"""The engine against a real Redis Cluster (3 primaries, 3 replicas on loopback, tests/cluster_servers.py): jobs on
queues spread over every node run to their end, operator actions and the console's figures cover every node,
flow control spans nodes, a worker blocks on queues of several nodes without polling, and a primary killed and
its replica promoted loses nothing acknowledged."""

import itertools
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from jobconsole.core import Client, JobState, TaskRegistry, default_registry
from jobconsole.core.client import JobSpec
from jobconsole.core.connection import connect
from jobconsole.core.groups import Group
from jobconsole.core.keys import queue_keys
from jobconsole.core.maintenance import Maintenance
from jobconsole.core.queries import Queries
from jobconsole.core.store import Store
from tests.cluster_servers import ClusterSetup
from tests.conftest import PROJECT, PYTHON, manage_env
from tests.helpers import run_burst, wait_for, worker_in_thread


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSetup]:
    setup = ClusterSetup(tmp_path_factory.mktemp("cluster")).start()
    yield setup
    setup.stop()


@pytest.fixture
def rc(cluster: ClusterSetup) -> Iterator["redis.Redis"]:
    connection = connect(cluster.url)
    connection.flushall()  # every primary
    yield connection
    connection.close()


def spread(cluster: ClusterSetup, per_node: int = 2, prefix: str = "q") -> list[str]:
    """Queue names, `per_node` on each primary."""
    chosen: dict[str, list[str]] = {}
    i = 0
    while len(chosen) < len(cluster.primaries()) or min(len(v) for v in chosen.values()) < per_node:
        name = f"{prefix}{i}"
        node = cluster.node_of(queue_keys(name).ready).name
        if len(chosen.setdefault(node, [])) < per_node:
            chosen[node].append(name)
        i += 1
    return [q for names in chosen.values() for q in names]


@pytest.fixture
def registry() -> TaskRegistry:
    reg = TaskRegistry()

    @reg.task(name="t.ok", queue="q")
    def ok(x: int = 0) -> dict[str, int]:
        return {"x": x}

    @reg.task(name="t.flaky", queue="q", max_retries=1, retry_delay=0.05, backoff_strategy="constant")
    def flaky(context_file: str) -> str:
        path = Path(context_file)
        if not path.exists():
            path.write_text("failed once")
            raise RuntimeError("first attempt fails")
        return "second attempt"

    @reg.task(name="t.boom", queue="q", max_retries=0)
    def boom() -> None:
        raise RuntimeError("always")

    @reg.task(name="t.sleep", queue="q", max_retries=0, group="ext")
    def sleep(seconds: float = 0.1) -> None:
        time.sleep(seconds)

    return reg


def test_queues_spread_over_every_node_and_jobs_run_to_their_end(
    cluster: ClusterSetup, rc: "redis.Redis", registry: TaskRegistry, tmp_path: Path
) -> None:
    queues = spread(cluster)
    assert len({cluster.node_of(queue_keys(q).ready).name for q in queues}) == 3
    client = Client(rc, registry)
    ok = client.enqueue_many([JobSpec(task="t.ok", params={"x": i}, queue=q) for q in queues for i in range(20)])
    flaky = [client.enqueue("t.flaky", {"context_file": str(tmp_path / q)}, queue=q) for q in queues]
    dead = [client.enqueue("t.boom", queue=q) for q in queues]
    assert sorted(client.queues()) == sorted(queues)
    assert [client.counts(q).queued for q in queues] == [22] * len(queues)
    run_burst(rc, registry, queues, burst_horizon=1.0)
    for q in queues:
        counts = client.counts(q)
        assert (counts.completed, counts.dead, counts.queued, counts.running) == (21, 1, 0, 0), q
    assert client.get(ok[-1].id).result == {"x": 19}
    assert all(client.get(j.id).state is JobState.COMPLETED and client.get(j.id).attempts == 2 for j in flaky)
    for job in dead:  # requeued from the dead letters (found without naming its queue), then dead again
        assert client.locate(job.id) == job.queue
        client.requeue(job.id)
    run_burst(rc, registry, queues)
    assert [client.get(j.id).state for j in dead] == [JobState.DEAD] * len(dead)
    assert len(client.get(dead[0].id).history) == 2


def test_operator_actions_and_figures_cover_every_node(
    cluster: ClusterSetup, rc: "redis.Redis", registry: TaskRegistry
) -> None:
    queues = spread(cluster, per_node=1)
    client = Client(rc, registry)
    later = [client.enqueue("t.ok", {"x": 1}, queue=q, delay=3600) for q in queues]
    unique = [client.enqueue("t.ok", queue=q, unique_key="only-one") for q in queues]
    again = [client.enqueue("t.ok", queue=q, unique_key="only-one") for q in queues]
    assert [a.id for a in again] == [u.id for u in unique]  # the unique key holds, per queue, on every node
    client.cancel(later[0].id)
    client.delete(later[1].id)
    assert client.delete_unique(queues[2], "only-one") == unique[2].id
    client.pause(queues[0])
    queries = Queries(Store(rc))
    gauges = {g.queue: g for g in queries.queues.gauges(queues)}
    assert [gauges[q].scheduled for q in queues] == [0, 0, 1]
    assert [gauges[q].queued for q in queues] == [1, 1, 0]
    assert gauges[queues[0]].paused and not gauges[queues[1]].paused
    with worker_in_thread(rc, registry, queues, name="cluster-w1"):
        wait_for(lambda: client.counts(queues[1]).completed == 1)
        assert [w.id for w in queries.workers.all()] == ["cluster-w1"]
        assert client.counts(queues[0]).queued == 1  # paused
        client.resume(queues[0])
        wait_for(lambda: client.counts(queues[0]).completed == 1)
    assert client.get(later[0].id).state is JobState.CANCELLED


def test_a_worker_blocks_on_queues_of_every_node(
    cluster: ClusterSetup, rc: "redis.Redis", registry: TaskRegistry
) -> None:
    """Idle, the worker blocks on each queue's keys (one slot each) in a thread of its own: a job enqueued on any
    node starts at once, a handed-off job (the intake's lease to an idle worker) included."""
    queues = spread(cluster, per_node=1)
    client = Client(rc, registry)
    with worker_in_thread(rc, registry, queues, concurrency=2) as worker:
        wait_for(lambda: rc.zcard(queue_keys(queues[-1]).idle) == 1)  # registered idle on every queue
        latencies = []
        for n, q in enumerate(queues * 3):
            time.sleep(0.3)  # idle again, blocked
            started = time.monotonic()
            job = client.enqueue("t.ok", {"x": n}, queue=q)
            wait_for(lambda j=job: client.get(j.id, history=False).state is JobState.COMPLETED, interval=0.002)
            latencies.append(time.monotonic() - started)
        assert worker.processed == 9
    assert max(latencies) < 0.25, latencies


def test_flow_control_spans_nodes(cluster: ClusterSetup, rc: "redis.Redis", registry: TaskRegistry) -> None:
    """A concurrency group's slots live on one node ({g:ext}), its jobs' queues on others."""
    queues = spread(cluster, per_node=1, prefix="fc")
    client = Client(rc, registry)
    client.define_group(Group("ext", connections=1))
    client.set_queue_limit(queues[0], 1)
    jobs = [client.enqueue("t.sleep", {"seconds": 0.05}, queue=q) for q in queues for _ in range(4)]
    with worker_in_thread(rc, registry, queues, concurrency=4), worker_in_thread(rc, registry, queues):
        wait_for(lambda: all(client.get(j.id, history=False).state is JobState.COMPLETED for j in jobs), 20)
    # One slot: no two runs overlapped. Judged from each job's claim and ack (Redis's clock, where the slot is
    # taken and given back), not by polling the queues' running counts, which are on different nodes and read
    # one after another: a hand-off between two reads looked like two at once.
    spans = sorted((job.started_at, job.finished_at) for job in (client.get(j.id, history=False) for j in jobs))
    assert all(None not in span for span in spans), spans
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans)), spans  # type: ignore[operator]
    flow = Queries(Store(rc)).queues.flow_control()
    assert [g.name for g in flow.groups] == ["ext"] and flow.groups[0].in_use == 0
    assert flow.queue_limits == {queues[0]: 1}


def test_maintenance_promotes_and_recovers_on_every_node(
    cluster: ClusterSetup, rc: "redis.Redis", registry: TaskRegistry
) -> None:
    queues = spread(cluster, per_node=1, prefix="m")
    client = Client(rc, registry)
    for q in queues:
        client.enqueue("t.ok", queue=q, delay=0.05)
    time.sleep(0.1)
    maintenance = Maintenance(rc)
    assert maintenance.is_leader()
    maintenance.step()
    assert [client.counts(q).queued for q in queues] == [1, 1, 1]


def test_a_gone_workers_jobs_are_taken_back_on_every_node(
    cluster: ClusterSetup, rc: "redis.Redis", registry: TaskRegistry
) -> None:
    """The decision in the registry's slot, the takebacks in each queue's slot (three nodes), in one pass."""
    from jobconsole.core.groups import Group
    from jobconsole.core.keys import group_keys
    from jobconsole.core.store import WorkerIdentity

    queues = spread(cluster, per_node=1, prefix="g")
    client = Client(rc, registry)
    client.define_group(Group("gone-ext", connections=1))
    store = Store(rc)
    info = {"host": "h", "pid": 1, "queues": ",".join(queues), "state": "running"}
    assert store.register_worker("dead", ttl_s=30, now_ms=store.time_ms(), info=dict(info)) == ""  # no control
    assert store.worker_beat("dead", expiry_ms=300)
    identity = WorkerIdentity("dead", "h", 1)
    for q in queues:
        client.enqueue("t.ok", queue=q)
        assert len(store.run(store.claim_call(q, identity, 1, idle_ms=0)).leases) == 1
    assert store.group_acquire("gone-ext", 1, holder="dead", lease_ms=300_000, queue=queues[0]).tokens
    time.sleep(0.4)
    maintenance = Maintenance(rc)
    assert maintenance.step() == 3
    assert [client.counts(q).queued for q in queues] == [1, 1, 1]
    assert rc.zcard(group_keys("gone-ext").slots) == 0
    assert {w.id: w for w in client.queries.workers.all()}["dead"].jobs_taken_back == 3


def test_enqueue_waits_for_a_replica_on_every_node(
    cluster: ClusterSetup, rc: "redis.Redis", registry: TaskRegistry
) -> None:
    """`replicas=1`: WAIT follows the writes on every node the batch went to; the fewest acknowledgements count."""
    queues = spread(cluster, per_node=1, prefix="w")
    client = Client(rc, registry, replicas=1, replicas_timeout=2.0)
    results = client.enqueue_many([JobSpec(task="t.ok", queue=q) for q in queues for _ in range(3)])
    assert len(results) == 9
    assert client.enqueue("t.ok", queue=queues[0]).queue == queues[0]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@pytest.mark.slow
def test_runworker_serves_queues_on_every_node_without_polling(
    cluster: ClusterSetup, rc: "redis.Redis", tmp_path: Path
) -> None:
    """A real `manage.py runworker` on queues of the three nodes: every job runs, and idle it uses next to no CPU
    (blocked in one BLPOP per queue, not polling)."""
    queues = spread(cluster, per_node=1, prefix="rw")
    env = manage_env(cluster.url, tmp_path, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    cmd = [PYTHON, str(PROJECT / "manage.py"), "runworker", "--queues", ",".join(queues), "--no-mirror"]
    client = Client(rc, default_registry, strict=False)
    proc = subprocess.Popen([*cmd, "--concurrency", "4"], env=env, cwd=PROJECT)
    try:
        wait_for(lambda: all(rc.zcard(queue_keys(q).idle) for q in queues), 30)
        jobs = [client.enqueue("examples.echo", {"n": n}, queue=q) for n, q in enumerate(queues * 5)]
        wait_for(lambda: all(client.get(j.id, history=False).state is JobState.COMPLETED for j in jobs), 20)
        time.sleep(1.5)  # settled: idle, blocked
        before, started = _cpu_seconds(proc.pid), time.monotonic()
        time.sleep(2.0)
        idle_share = (_cpu_seconds(proc.pid) - before) / (time.monotonic() - started)
        late = client.enqueue("examples.echo", {"late": True}, queue=queues[-1])
        wait_for(lambda: client.get(late.id, history=False).state is JobState.COMPLETED, 5)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    assert idle_share < 0.05, f"idle worker used {idle_share:.1%} of a core"


def test_a_workflow_in_one_queue_runs_on_a_cluster_and_depends_on_across_queues_is_refused(
    rc: "redis.Redis", registry: TaskRegistry
) -> None:
    from jobconsole.core.compose import chord
    from jobconsole.core.workflows import InvalidWorkflow

    client = Client(rc, registry)
    parent = client.enqueue("t.ok", {"x": 0}, queue="other")
    before = rc.dbsize()
    with pytest.raises(InvalidWorkflow, match="share one"):  # a workflow across queues: test_cluster_workflows.py
        client.enqueue("t.ok", {"x": 1}, depends_on=[parent])
    assert rc.dbsize() == before
    flow = chord([JobSpec(task="t.ok", params={"x": i}) for i in range(20)], JobSpec(task="t.ok"), pass_results=None)
    made = client.enqueue_workflow(flow)
    run_burst(rc, registry, ["q"])
    view = client.queries.workflows.get(made.workflow_id, made.queue)
    assert view is not None and view.counts() == {"completed": 21}
    a = client.enqueue("t.ok", {"x": 1})
    b = client.enqueue("t.ok", {"x": 2}, depends_on=[a])
    run_burst(rc, registry, ["q"])
    assert client.get(b.id).state is JobState.COMPLETED
