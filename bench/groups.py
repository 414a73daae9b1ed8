"""Concurrency groups benchmark: how fast one worker drains a backlog of no-op jobs of one group, by the group's
`connections`, against the same jobs outside any group (private redis-server, one in-process Worker).

    .venv/bin/python bench/groups.py [--jobs 2000] [--concurrency 10] [--connections 1,3,10]
"""

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--connections", default="1,3,10")
    args = parser.parse_args()

    from jobconsole.core import Client, JobSpec, TaskRegistry, Worker
    from jobconsole.core.connection import connect
    from jobconsole.core.groups import Group
    from tests.redis_server import RedisServer

    server = RedisServer(Path(tempfile.mkdtemp(prefix="jc-groups-bench-"))).start()
    try:
        r = connect(server.url)
        registry = TaskRegistry()
        registry.register(lambda: None, name="bench.grouped", queue="q", group="g")
        registry.register(lambda: None, name="bench.plain", queue="q")
        client = Client(r, registry)
        runs = [("no group", "bench.plain", 0)]
        runs += [(f"group, connections {n}", "bench.grouped", int(n)) for n in args.connections.split(",")]
        print(f"{args.jobs:,} no-op jobs, one worker of {args.concurrency} threads")
        for label, task, connections in runs:
            r.flushall()
            if connections:
                client.define_group(Group("g", connections=connections))
            client.enqueue_many([JobSpec(task=task) for _ in range(args.jobs)])
            worker = Worker(r, ["q"], registry, concurrency=args.concurrency, maintenance=False)
            thread = threading.Thread(target=worker.run)
            began = time.monotonic()
            thread.start()
            while client.counts("q").completed < args.jobs:
                time.sleep(0.005)
            took = time.monotonic() - began
            worker.request_stop()
            thread.join(10)
            print(f"  {label:24} {took:6.2f} s  {args.jobs / took:8,.0f} jobs/s")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
