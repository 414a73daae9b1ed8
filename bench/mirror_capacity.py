"""Mirror capacity: how many events a second the database mirror applies when it has a backlog.

    .venv/bin/python bench/mirror_capacity.py --jobs 20000 [--database-url postgres://...] [--profile] [--follow]

It starts a private redis-server and a fresh database (SQLite in WAL mode in a temp dir unless --database-url is
given; PostgreSQL is flushed), enqueues `--jobs` jobs whose parameters are a small dict of three fields, runs them
all with a `runworker --burst --no-mirror` process, and times the mirror applying them in this process in two
phases, as a mirror that keeps up sees them: the 'enqueued' events after the enqueue, then the 'started' and
'completed' events after the run. Capacity is events applied per second of wall time;
the mirror's CPU per event is this process's CPU time over the same span. Redis's CPU for the mirror's reads is
reported per event too, and each phase's CPU per job. `--profile` prints the top of a cProfile of the drain
(PSORT=cumulative and PTOP=60 in the environment sort and cut it otherwise). `--follow` runs the second phase as the
Procfile's row does: the mirror (runmirror's loop, with its settle and pace) follows the worker while it drains,
and its CPU is the mirror thread's own.
"""

import argparse
import cProfile
import os
import pstats
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PARAMS = {"user_id": 48213, "email": "ada@example.com", "plan": "pro"}


def redis_cpu(connection: object) -> float:
    info = connection.info("cpu")  # type: ignore[attr-defined]
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def follow(mirror: Any, run_worker: Callable[[], object], jobs: int, phases: list[tuple[float, float, float]]) -> None:
    """Run the worker while the mirror follows it in a thread, until the database holds every job completed; the
    mirror thread's own CPU time (this process's main thread only waits)."""
    import threading

    from jobconsole.engine import get_redis
    from jobconsole.models import Job

    redis = get_redis()
    stop = threading.Event()
    used: list[float] = []

    def run() -> None:
        started = time.thread_time()
        try:
            while not stop.is_set():
                mirror.turn(stop)
        finally:
            used.append(time.thread_time() - started)

    batches: list[int] = []  # jobs per batch
    mirror.writer.on_batch = lambda stats: batches.append(stats.jobs)
    w, r = time.monotonic(), redis_cpu(redis)
    thread = threading.Thread(target=run, name="mirror")
    thread.start()
    run_worker()
    while Job.objects.filter(state="completed").count() < jobs:
        time.sleep(0.02)
    wall = time.monotonic() - w
    stop.set()
    thread.join()
    phases.append((used[0], wall, redis_cpu(redis) - r))
    mirror.writer.on_batch = None
    print(f"following: {len(batches)} batches, {sum(batches) / max(1, len(batches)):,.0f} jobs per batch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20000, help="jobs in the backlog (three events each)")
    parser.add_argument("--batch", type=int, default=None, help="mirror events per transaction (default: setting)")
    parser.add_argument("--database-url", default="", help="default: a fresh SQLite file (WAL)")
    parser.add_argument("--sequential", action="store_true", help="each batch commits before the next is read")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the drain")
    parser.add_argument(
        "--follow",
        action="store_true",
        help="the second phase as the Procfile's row runs it: the mirror (runmirror's loop, its settle and pace, in"
        " a thread) follows the worker's events while the worker drains the backlog, rather than draining after it",
    )
    args = parser.parse_args()

    import private_stack

    server, env = private_stack.start("jc-mirror-capacity-", database_url=args.database_url)
    try:
        import django
        from django.core.management import call_command

        django.setup()
        from django.db import connection

        if args.database_url and connection.vendor == "postgresql":
            call_command("flush", interactive=False, verbosity=0)
        call_command("migrate", verbosity=0)

        import jobconsole.examples  # noqa: F401
        from jobconsole.core import Client, JobSpec, default_registry
        from jobconsole.engine import get_redis
        from jobconsole.mirror.service import build_mirror
        from jobconsole.models import Job

        redis = get_redis()
        client = Client(redis, default_registry)
        # The mirror follows the queue from its start, as in production (a queue it first meets is resynced
        # from Redis's sets instead, which is not what this measures).
        redis.sadd("jc:{meta}:queues", "examples.echo")
        # As runmirror builds it (the settings' batch, commits overlapping the next batch's reads).
        overrides = {"batch": args.batch} if args.batch else {}
        mirror = build_mirror(redis, **overrides, **({"overlap": False} if args.sequential else {}))
        mirror.drain()
        profiler = cProfile.Profile() if args.profile else None
        cpu = wall = rcpu = 0.0
        phases: list[tuple[float, float, float]] = []  # each phase's (CPU, wall, Redis CPU)

        def timed_drain() -> None:
            nonlocal cpu, wall, rcpu
            c, w, r = time.process_time(), time.monotonic(), redis_cpu(redis)
            if profiler:
                profiler.enable()
            mirror.drain()
            if profiler:
                profiler.disable()
            phases.append((time.process_time() - c, time.monotonic() - w, redis_cpu(redis) - r))
            cpu, wall, rcpu = cpu + phases[-1][0], wall + phases[-1][1], rcpu + phases[-1][2]

        # Two phases, as a mirror that keeps up sees a job: its 'enqueued' event in one batch (a queued row),
        # its 'started' and 'completed' events in a later one (the final row and the attempt).
        for start in range(0, args.jobs, 1000):
            n = min(1000, args.jobs - start)
            client.enqueue_many([JobSpec(task="examples.echo", params=PARAMS) for _ in range(n)])
        client.store.drain("examples.echo")  # the intake's jobs become jobs with events
        timed_drain()
        worker = [sys.executable, str(ROOT / "manage.py"), "runworker", "--queues", "examples.echo", "--burst",
                  "--no-mirror", "--no-maintenance", "--no-scheduler", "--no-system-worker"]  # fmt: skip
        if args.follow:
            follow(mirror, lambda: subprocess.run(worker, env=env, cwd=ROOT, check=True), args.jobs, phases)
            cpu, wall, rcpu = cpu + phases[-1][0], wall + phases[-1][1], rcpu + phases[-1][2]
        else:
            subprocess.run(worker, env=env, cwd=ROOT, check=True)
            timed_drain()
        events = mirror.writer.events_applied
        completed = Job.objects.filter(state="completed").count()
        mirror.close()
    finally:
        server.stop()

    print(f"database: {connection.vendor}  jobs: {args.jobs}  completed in the database: {completed}")
    print(
        f"mirror: {events} events, {mirror.writer.rows_written} rows in {wall:.2f} s: "
        f"{events / wall:,.0f} events/s; mirror CPU {cpu / events * 1e6:.1f} µs/event "
        f"({cpu / wall:.2f} cores); Redis CPU for its reads {rcpu / events * 1e6:.1f} µs/event"
    )
    for name, (c, w, r) in zip(
        ["enqueued", "started+completed" + (" (following the worker)" if args.follow else "")], phases, strict=True
    ):
        print(
            f"  {name}: {w:.2f} s, {args.jobs / w:,.0f} jobs/s; per job: mirror CPU {c / args.jobs * 1e6:.1f} µs, "
            f"Redis CPU {r / args.jobs * 1e6:.1f} µs"
        )
    if profiler:
        pstats.Stats(profiler).sort_stats(os.environ.get("PSORT", "tottime")).print_stats(
            int(os.environ.get("PTOP", "25"))
        )


if __name__ == "__main__":
    main()
