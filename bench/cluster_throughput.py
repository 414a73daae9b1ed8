"""Throughput on a 3-primary Redis Cluster against a single Redis, with the same workers and producers.

    .venv/bin/python bench/cluster_throughput.py [--jobs 20000] [--workers 2] [--concurrency 8] [--queues 12]
                                                 [--producers 2]

Both setups run on loopback with AOF on (appendfsync everysec): one redis-server (tests/redis_server.py), and a
cluster of three primaries without replicas (tests/cluster_servers.py). For each, and for each workload:

- many queues: `--queues` queues (spread over the three primaries in the cluster), jobs round-robin over them;
- one hot queue: every job in one queue (so in one slot: one primary does all the work in the cluster),

`--workers` `manage.py runworker` processes serving every queue (concurrency `--concurrency`, no maintenance, no
mirror) wait idle; then `--producers` threads enqueue `--jobs` no-op jobs (examples.echo) in batches of 100
(`Client.enqueue_many`), and the clock runs until every job has completed. Printed: the enqueue rate (jobs/s
while producing) and the end-to-end rate (jobs/s from the first enqueue to the last completion).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jobconsole.core import Client, JobSpec  # noqa: E402
from jobconsole.core.connection import connect  # noqa: E402
from jobconsole.core.keys import queue_keys  # noqa: E402
from jobconsole.core.queries import Queries  # noqa: E402
from jobconsole.core.store import Store  # noqa: E402
from tests.cluster_servers import ClusterSetup  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

BATCH = 100


def worker_env(url: str, var: Path) -> dict[str, str]:
    return {
        **os.environ, "REDIS_URL": url, "JOBCONSOLE_TASK_MODULES": "jobconsole.examples",
        "JOBCONSOLE_VAR_DIR": str(var), "DJANGO_SETTINGS_MODULE": "project.settings",
        "SECRET_KEY": os.environ.get("SECRET_KEY") or "bench-only-not-a-secret", "PYTHONPATH": str(ROOT),
    }  # fmt: skip


def run(url: str, queues: list[str], args: argparse.Namespace, var: Path) -> tuple[float, float]:
    """(enqueue jobs/s, end-to-end jobs/s) for one setup and workload."""
    r = connect(url)
    r.flushall()
    cmd = [sys.executable, str(ROOT / "manage.py"), "runworker", "--queues", ",".join(queues), "--no-maintenance",
           "--no-mirror", "--no-scheduler", "--no-system-worker", "--concurrency", str(args.concurrency)]  # fmt: skip
    workers = [
        subprocess.Popen(cmd, env=worker_env(url, var), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(args.workers)
    ]
    try:
        queries = Queries(Store(r))
        deadline = time.monotonic() + 60
        while len(queries.workers.all()) < args.workers or not all(r.zcard(queue_keys(q).idle) for q in queues):
            if time.monotonic() > deadline:
                raise RuntimeError("the workers did not start")
            time.sleep(0.1)
        echo = "examples.echo"
        specs = [JobSpec(task=echo, params={"n": i}, queue=queues[i % len(queues)]) for i in range(args.jobs)]
        shares = [specs[p :: args.producers] for p in range(args.producers)]

        def produce(share: list[JobSpec]) -> None:
            client = Client(connect(url), strict=False)
            for start in range(0, len(share), BATCH):
                client.enqueue_many(share[start : start + BATCH])

        threads = [threading.Thread(target=produce, args=(share,)) for share in shares]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        produced = time.monotonic()
        while sum(queries.queues.counts(q).completed for q in queues) < args.jobs:
            if time.monotonic() > produced + 300:
                raise RuntimeError("the jobs did not complete within 300 s")
            time.sleep(0.02)
        finished = time.monotonic()
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(30)
        r.close()
    return args.jobs / (produced - started), args.jobs / (finished - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--queues", type=int, default=12)
    parser.add_argument("--producers", type=int, default=2)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="jc-cluster-bench-"))
    single = RedisServer(tmp / "single", appendfsync="everysec").start()
    cluster = ClusterSetup(tmp / "cluster", replicas=False).start()
    many = [f"bench{i}" for i in range(args.queues)]
    nodes = {cluster.node_of(queue_keys(q).ready).name for q in many}
    print(f"{args.jobs} jobs, {args.workers} workers x {args.concurrency}, {args.producers} producers; "
          f"{args.queues} queues over {len(nodes)} cluster nodes; {os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'setup':<16}{'workload':<16}{'enqueue jobs/s':>16}{'end-to-end jobs/s':>20}")
    try:
        for workload, queues in (("many queues", many), ("one hot queue", ["hot"])):
            for name, url in (("single Redis", single.url), ("3-node cluster", cluster.url)):
                enqueue, end_to_end = run(url, queues, args, tmp / "var")
                print(f"{name:<16}{workload:<16}{enqueue:>16,.0f}{end_to_end:>20,.0f}", flush=True)
    finally:
        cluster.stop()
        single.stop()


if __name__ == "__main__":
    main()
