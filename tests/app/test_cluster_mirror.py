"""The database mirror and the console on a Redis Cluster (3 primaries on loopback): the mirror reads every node's
event streams and applies them, and the console's queue list and counts cover every node."""

from collections.abc import Iterator

import pytest
import redis

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
