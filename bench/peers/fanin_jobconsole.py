"""Jobconsole's side of bench/workflow_peers.py: a chord of N members and one callback (run with the project's venv).

    fanin_jobconsole.py worker --redis-url URL      # one worker process, concurrency 10, until SIGTERM
    fanin_jobconsole.py create --redis-url URL --n N  # one call; prints {"t0": ..., "created_s": ...}

The tasks stamp wall-clock times into Redis for the harness: each member RPUSHes its end to bench:ends, the callback
SETs bench:cb_start and RPUSHes {"cb_end", "sum"} to bench:done.
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import redis

from jobconsole.core import Client, JobSpec, TaskRegistry, Worker
from jobconsole.core.compose import chord
from jobconsole.core.connection import connect

QUEUE = "fan"


def registry(stamps: redis.Redis) -> TaskRegistry:
    reg = TaskRegistry()

    @reg.task(name="fan.member", queue=QUEUE)
    def member(i: int) -> int:
        stamps.rpush("bench:ends", repr(time.time()))  # the member's last act
        return i

    @reg.task(name="fan.callback", queue=QUEUE)
    def callback(results: dict[str, int]) -> int:
        stamps.set("bench:cb_start", repr(time.time()))
        total = sum(results.values())
        stamps.rpush("bench:done", json.dumps({"cb_end": time.time(), "sum": total}))
        return total

    return reg


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["worker", "create"])
    ap.add_argument("--redis-url", required=True)
    ap.add_argument("--n", type=int, default=10)
    args = ap.parse_args()
    stamps = redis.Redis.from_url(args.redis_url)
    reg = registry(stamps)
    if args.role == "worker":
        # Production defaults but for the queue and the concurrency the benchmark fixes for every system.
        worker = Worker(connect(args.redis_url), [QUEUE], reg, concurrency=10)
        worker.install_signal_handlers()
        worker.run()
        return
    client = Client(connect(args.redis_url), reg)
    client.redis.ping()  # the connection is made before the clock starts, as in a long-lived client
    flow = chord([JobSpec(task="fan.member", params={"i": i}) for i in range(args.n)],
                 JobSpec(task="fan.callback"), pass_results="results")  # fmt: skip
    t0 = time.time()
    p0 = time.perf_counter()
    client.enqueue_workflow(flow)
    created = time.perf_counter() - p0
    print(json.dumps({"t0": t0, "created_s": created}))


if __name__ == "__main__":
    main()
