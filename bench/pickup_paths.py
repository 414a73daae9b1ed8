"""Which path an idle worker's pick-ups take, and how long a stop of an idle worker takes (issue 31).

    .venv/bin/python bench/pickup_paths.py [--samples 150] [--gap-ms 20,60]

One Worker (concurrency 10, in this process, on a private redis-server) and jobs enqueued one at a time after
random gaps, as the latency benchmark sends them (the task pushes to a list, as that benchmark's does). Counts
how each job reached `Launcher.start`: a task thread's blocking pop, which runs the job itself (one thread
wake-up after Redis's reply), the watch thread's pop (the watch thread, then the dispatcher, then a task thread),
or a claim. Prints those counts, the pick-up p50 / p99 (enqueue call start to task start, this process's clock)
and how long `request_stop()` took with the worker idle (a blocking pop lasts up to a second).
"""

import argparse
import collections
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import redis  # noqa: E402
from run_peers import private_redis  # noqa: E402

from jobconsole.core import Client, TaskRegistry, Worker  # noqa: E402
from jobconsole.core.worker.launcher import Launcher  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=150)
    parser.add_argument("--gap-ms", default="20,60", help="min,max of the random gap before each enqueue")
    args = parser.parse_args()
    low, high = (float(x) / 1000 for x in args.gap_ms.split(","))
    with private_redis("redis-server") as url:
        r = redis.Redis.from_url(url, decode_responses=True)
        registry = TaskRegistry()
        delays: list[float] = []

        @registry.task(name="bench.pickup", queue="q")
        def pickup(t_enq: float) -> None:
            delays.append((time.perf_counter() - t_enq) * 1000)
            r.rpush("bench:seen", 1)

        paths: collections.Counter[str] = collections.Counter()
        real_start = Launcher.start

        def start(self: Launcher, *a: Any, announce: bool = False, run_here: bool = False, **kw: Any) -> Any:
            paths["task thread's pop" if run_here else "watch thread's pop" if announce else "claim"] += 1
            return real_start(self, *a, announce=announce, run_here=run_here, **kw)

        Launcher.start = start  # type: ignore[method-assign]
        worker = Worker(r, ["q"], registry, maintenance=False)
        thread = threading.Thread(target=worker.run)
        thread.start()
        client = Client(r, registry)
        time.sleep(0.5)
        for _ in range(args.samples):
            time.sleep(random.uniform(low, high))
            client.enqueue("bench.pickup", params={"t_enq": time.perf_counter()})
        time.sleep(0.3)
        asked = time.monotonic()
        worker.request_stop()
        thread.join(10)
        stop_s = time.monotonic() - asked
    delays.sort()
    p50, p99 = delays[len(delays) // 2], delays[min(len(delays) - 1, int(len(delays) * 0.99))]
    print(f"paths: {dict(paths)}  pick-up p50 {p50:.2f} ms  p99 {p99:.2f} ms  idle stop {stop_s * 1000:.0f} ms")


if __name__ == "__main__":
    main()
