"""A fan-out of N members with one callback (a chord): the time to create it in one call, the Redis cost per member,
and the time from the last member's end to its callback's start, with a worker in this process.

    .venv/bin/python bench/workflow_fanin.py [N ...]   (default 500 10000)

A private redis-server (appendfsync everysec, as production runs) on a free port; nothing else uses it.
"""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobconsole.core import Client, JobSpec, TaskRegistry, Worker
from jobconsole.core.compose import chord
from jobconsole.core.connection import connect
from tests.redis_server import RedisServer

ENDED: list[float] = []
STARTED: list[float] = []


def registry() -> TaskRegistry:
    reg = TaskRegistry()

    @reg.task(name="b.member", queue="fan")
    def member(i: int) -> int:
        ENDED.append(time.monotonic())  # as close to the member's end as a task gets
        return i

    @reg.task(name="b.callback", queue="fan")
    def callback(results: dict[str, int]) -> int:
        STARTED.append(time.monotonic())
        return len(results)

    return reg


def run(n: int, url: str) -> None:
    r = connect(url)
    r.flushall()
    reg = registry()
    client = Client(r, reg)
    client.store.load_scripts()  # as after any earlier call: the first call's NOSCRIPT would send it all twice
    flow = chord([JobSpec(task="b.member", params={"i": i}) for i in range(n)],
                 JobSpec(task="b.callback"), pass_results="results")  # fmt: skip
    before_mem = int(r.info("memory")["used_memory"])
    t0 = time.perf_counter()
    made = client.enqueue_workflow(flow)
    created = time.perf_counter() - t0
    after_mem = int(r.info("memory")["used_memory"])
    ENDED.clear()
    STARTED.clear()
    t1 = time.perf_counter()
    Worker(r, ["fan"], reg, burst=True, maintenance=False, concurrency=8).run()
    total = time.perf_counter() - t1
    callback = client.get(made.job_ids_by_step["chord.body"])
    assert callback.result == n, callback
    latency_ms = (STARTED[0] - max(ENDED)) * 1000
    print(f"n={n}: created in {created * 1000:.0f} ms ({created / n * 1e6:.0f} us/member), "
          f"{(after_mem - before_mem) / n:.0f} bytes/member before running; last member end -> callback start "
          f"{latency_ms:.1f} ms; all run in {total:.1f} s")  # fmt: skip


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [500, 10_000]
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp), appendfsync="everysec").start()
        try:
            for n in sizes:
                run(n, server.url)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
