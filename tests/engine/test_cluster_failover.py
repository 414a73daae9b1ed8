"""A Redis Cluster primary killed (SIGKILL) mid-run and its replica promoted (cluster-node-timeout 1 s): producers
and workers carry on by themselves, and every job a replica acknowledged (WAIT 1 on enqueue) runs to its end."""

import threading
import time
from collections.abc import Iterator

import pytest
import redis

from jobconsole.core import Client, JobState, NotReplicated, TaskRegistry
from jobconsole.core.connection import connect
from jobconsole.core.keys import queue_keys
from tests.cluster_servers import ClusterSetup
from tests.engine.test_cluster import spread
from tests.helpers import wait_for, worker_in_thread


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSetup]:
    setup = ClusterSetup(tmp_path_factory.mktemp("cluster-failover")).start()
    yield setup
    setup.stop()


class Producer(threading.Thread):
    """Enqueues round-robin over `queues` until stopped: which jobs a replica acknowledged, which only the primary
    accepted (NotReplicated: the promoted node has no replica left), how many calls failed outright."""

    def __init__(self, client: Client, queues: list[str]) -> None:
        super().__init__(daemon=True)
        self.client, self.queues = client, queues
        self.acknowledged: list[str] = []
        self.unreplicated: list[str] = []
        self.errors = 0
        self.stop = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            try:
                self.acknowledged.append(self.client.enqueue("t.ok", {"n": n}, queue=self.queues[n % 3]).id)
            except NotReplicated as slow:
                self.unreplicated += [r.id for r in slow.accepted]
            except redis.RedisError:
                self.errors += 1
                time.sleep(0.05)
            n += 1
            time.sleep(0.002)


@pytest.mark.slow
def test_a_primary_killed_mid_run_loses_nothing_acknowledged(cluster: ClusterSetup) -> None:
    registry = TaskRegistry()
    registry.register(lambda n=0: n, name="t.ok", queue="q", max_retries=3, visibility_timeout=2.0)
    queues = spread(cluster, per_node=1, prefix="f")
    producer_redis, worker_redis = connect(cluster.url), connect(cluster.url)
    client = Client(producer_redis, registry, replicas=1, replicas_timeout=0.2)
    producer = Producer(client, queues)
    with (
        worker_in_thread(worker_redis, registry, queues, concurrency=4, maintenance=True),
        worker_in_thread(worker_redis, registry, queues, concurrency=4),
    ):
        producer.start()
        time.sleep(1.5)
        before = len(producer.acknowledged)
        victim = cluster.node_of(queue_keys(queues[0]).ready)
        cluster.kill_and_wait_failover(victim)
        wait_for(lambda: len(producer.acknowledged) > before + 100, 20)  # producing again
        producer.stop.set()
        producer.join(5)
        checker = Client(connect(cluster.url), registry)
        accepted = producer.acknowledged + producer.unreplicated

        def finished() -> bool:
            return all(checker.get(i, history=False).state is JobState.COMPLETED for i in accepted)

        wait_for(finished, 30, interval=0.2)
    by_queue = {q: sum(1 for i in accepted if checker.locate(i) == q) for q in queues}
    assert all(n > 50 for n in by_queue.values()), by_queue
    assert len(producer.unreplicated) > 0  # the promoted primary has no replica left: WAIT 1 says so
