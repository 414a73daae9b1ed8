"""The database mirror and the console on a Redis Cluster (3 primaries on loopback): the mirror reads every node's
event streams and applies them, the console's queue list and counts cover every node, and so does health."""

import time
from collections.abc import Iterator

import pytest
import redis

from jobconsole import service_health
from jobconsole.core import JobSpec, keys
from jobconsole.core.connection import connect
from jobconsole.core.keys import queue_keys
from jobconsole.models import Job, MirrorCursor
from tests.app.test_console_pages import VIEW, web
from tests.cluster_servers import ClusterSetup
from tests.engine.test_cluster import spread
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import assert_db_matches_redis, run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSetup]:
    setup = ClusterSetup(tmp_path_factory.mktemp("cluster"), replicas=False).start()
    yield setup
    setup.stop()


@pytest.fixture
def redis_url(cluster: ClusterSetup) -> str:
    return cluster.url


@pytest.fixture
def r(cluster: ClusterSetup) -> Iterator["redis.Redis"]:
    connection = connect(cluster.url)
    connection.flushall()
    yield connection
    connection.close()


def test_the_mirror_applies_events_from_every_node(cluster, client, mirror, r):
    queues = spread(cluster, per_node=1)
    assert len({cluster.node_of(queue_keys(q).events).name for q in queues}) == 3
    ok = [client.enqueue("examples.echo", {"n": n}, queue=q) for n, q in enumerate(queues * 4)]
    dead = [client.enqueue("examples.fail", {"message": "boom"}, queue=q, max_retries=0) for q in queues]
    mirror.drain()
    assert {Job.objects.get(id=j.id).state for j in ok} == {"queued"}
    run_worker(r, queues)
    mirror.drain()
    assert {Job.objects.get(id=j.id).state for j in ok} == {"completed"}
    assert {Job.objects.get(id=j.id).state for j in dead} == {"dead"}
    assert_db_matches_redis(r)
    assert sorted(MirrorCursor.objects.values_list("queue", flat=True)) == sorted(queues)
    assert mirror.reader.wait() is False  # nothing new on any node: blocks its time out, then says so


def test_the_console_counts_queues_of_every_node(cluster, client, r):
    queues = spread(cluster, per_node=1, prefix="console")
    for n, q in enumerate(queues):
        for _ in range(n + 1):
            client.enqueue("examples.echo", {}, queue=q)
    browser = web(*VIEW)
    text = browser.get("/queues/").content.decode()
    for q in queues:
        assert q in text
    assert [client.counts(q).queued for q in queues] == [1, 2, 3]
    detail = browser.get(f"/queues/{queues[2]}/")
    assert detail.status_code == 200 and detail.content.decode().count("examples.echo") >= 3
    assert browser.get("/healthz").status_code == 200  # a load balancer's check: Redis (every node) and the database


def test_health_probes_writes_on_the_shard_of_its_key_and_reads_every_node(cluster, client, r):
    """In a Cluster the write probe is one key in one slot; the mirror's lag and the workers rule read every node."""
    queues = spread(cluster, per_node=1, prefix="health")
    for q in queues:
        client.enqueue("examples.echo", {}, queue=q)
    result = service_health.check()
    waiting = sorted(f.reason for f in result.problems)
    assert waiting == [f"queue '{q}' has 1 waiting job and no live worker serves it (is a runworker for it deployed?)."
                       for q in sorted(queues)]  # fmt: skip
    [lag] = [f.reason for f in result.findings if f.component == "mirror"]
    assert lag.startswith("The database mirror lags")  # the jobs sit in their intakes, not yet events
    shard = cluster.node_of(keys.HEALTH_PROBE).client()
    shard.config_set("maxmemory", 1)
    try:
        body = web(*VIEW).get("/healthz").json()
        assert body["status"] == "degraded", body
        [refused] = [f["reason"] for f in body["findings"] if f["component"] == "redis-writes"]
        assert (
            refused.startswith("Redis refuses writes: OOM command not allowed")
            and "of 1 B, maxmemory-policy" in refused
        )
    finally:
        shard.config_set("maxmemory", 0)


def test_the_mirror_follows_a_workflow_across_nodes(cluster, client, mirror, r):
    """A workflow spanning slots (created in steps, its links relayed through outboxes): one Workflow row, its jobs
    and links in the database, whichever node each is on."""
    from jobconsole.core.compose import chain
    from jobconsole.core.maintenance import Maintenance
    from jobconsole.models import JobLink, Workflow

    queues = spread(cluster, per_node=1, prefix="wf")
    made = client.enqueue_workflow(chain(*(JobSpec(task="examples.echo", queue=q) for q in queues), pass_results=None))
    ids = [made.job_ids_by_step[f"chain.{i}"] for i in range(3)]
    mirror.drain()
    wf = Workflow.objects.get(id=made.workflow_id)
    assert (wf.size, wf.counts) == (3, {"queued": 1, "waiting": 2})
    assert {(ln.parent_id, ln.child_id) for ln in JobLink.objects.filter(workflow_id=made.workflow_id)} == {
        (ids[0], ids[1]), (ids[1], ids[2])
    }  # fmt: skip
    maintenance = Maintenance(r)
    for _ in range(3):  # each step in another slot: released by the maintenance pass after its parent's end
        run_worker(r, queues)
        time.sleep(0.25)  # a message to another slot is due 200 ms after it was written
        maintenance.step()
    run_worker(r, queues)
    mirror.drain()
    wf.refresh_from_db()
    assert (wf.state, wf.counts) == ("completed", {"completed": 3})
    assert_db_matches_redis(r)
