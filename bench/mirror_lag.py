"""Mirror lag benchmark: how long after Redis finishes a job its final state is committed to the database.

    .venv/bin/python bench/mirror_lag.py --rate 2000 --seconds 20 [--workers 1] [--database-url URL]

It starts a private redis-server, a fresh database (SQLite in WAL mode in a temp dir unless
--database-url is given; PostgreSQL is recreated from scratch), worker processes (`runworker --no-mirror`),
a producer process enqueueing `examples.echo` jobs at a steady rate, and the mirror loop in this process.
For every job reaching a final state it records (commit time of the mirror batch) - (finished_at in
Redis); both clocks are this machine's. Prints lag percentiles and the mirror's throughput.
"""

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def produce(redis_url: str, rate: int, seconds: float) -> None:
    """Enqueue `rate` jobs per second for `seconds`, in small batches every 10 ms."""
    import jobconsole.examples  # noqa: F401
    from jobconsole.core import Client, JobSpec, default_registry
    from jobconsole.core.connection import connect

    client = Client(connect(redis_url), default_registry)
    tick = 0.01
    per_tick = rate * tick
    started = time.monotonic()
    sent = 0.0
    n = 0
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(rate * elapsed) - n
        if due > 0:
            client.enqueue_many([JobSpec(task="examples.echo", params={"i": n + i}) for i in range(due)])
            n += due
        sent += per_tick
        time.sleep(max(0.0, started + (n / rate) - time.monotonic()) or tick / 10)
    print(f"produced {n} jobs in {time.monotonic() - started:.1f}s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=2000, help="jobs enqueued per second")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to produce")
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument("--concurrency", type=int, default=20, help="threads per worker")
    parser.add_argument("--batch", type=int, default=1000, help="mirror events per transaction")
    parser.add_argument("--database-url", default="", help="default: a fresh SQLite file (WAL)")
    parser.add_argument("--produce", nargs=3, metavar=("REDIS_URL", "RATE", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.produce:
        produce(args.produce[0], int(args.produce[1]), float(args.produce[2]))
        return

    import private_stack

    server, env = private_stack.start("jc-mirror-bench-", database_url=args.database_url, appendfsync="everysec")

    import django
    from django.core.management import call_command

    django.setup()
    from django.db import connection

    if args.database_url and connection.vendor == "postgresql":
        call_command("flush", interactive=False, verbosity=0)
    call_command("migrate", verbosity=0)

    from jobconsole.engine import get_redis
    from jobconsole.mirror.service import build_mirror
    from jobconsole.mirror.writer import BatchStats
    from jobconsole.models import Job

    lags: list[float] = []
    batches: list[BatchStats] = []

    seen: set[str] = set()

    def on_batch(stats: BatchStats) -> None:
        batches.append(stats)
        for job_id, finished in stats.finished:
            if job_id not in seen:  # the first commit showing the job final
                seen.add(job_id)
                lags.append(stats.committed_at - finished.timestamp())

    # The queue must exist before the mirror starts so its first pass is a (cheap) initial resync.
    get_redis().sadd("jc:{meta}:queues", "examples.echo")
    mirror = build_mirror(get_redis(), batch=args.batch)  # as runmirror builds it
    mirror.writer.on_batch = on_batch
    stop = threading.Event()
    thread = threading.Thread(target=mirror.run, args=(stop,), daemon=True)
    thread.start()

    manage = [sys.executable, str(ROOT / "manage.py")]
    workers = [
        subprocess.Popen(
            [
                *manage,
                "runworker",
                "--queues",
                "examples.echo",
                "--no-mirror",
                "--no-maintenance",
                "--concurrency",
                str(args.concurrency),
            ],
            env=env,
            cwd=ROOT,
        )
        for _ in range(args.workers)
    ]
    time.sleep(1.0)
    started = time.monotonic()
    producer = subprocess.run(
        [sys.executable, __file__, "--produce", server.url, str(args.rate), str(args.seconds)],
        env=env, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    print(producer.stdout, end="")
    expected = int(producer.stdout.split()[1])  # "produced N jobs in …": wait for every one of them
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done = len(lags)
        if done >= expected:
            break
        time.sleep(0.2)
    elapsed = time.monotonic() - started
    stop.set()
    thread.join(timeout=10)
    for w in workers:
        w.terminate()
    for w in workers:
        w.wait(timeout=30)
    completed = Job.objects.filter(state="completed").count()
    server.stop()

    if not lags:
        print("no job reached a final state")
        return
    lags.sort()

    def pct(p: float) -> float:
        return lags[min(len(lags) - 1, int(p / 100 * len(lags)))] * 1000

    events = sum(b.events for b in batches)
    rows = sum(b.rows for b in batches)
    busy = sum(b.seconds for b in batches)
    print(f"database: {connection.vendor}  rate: {args.rate}/s for {args.seconds:.0f}s  workers: {args.workers}")
    print(f"jobs completed in the database: {completed} of {expected} produced; lag samples: {len(lags)}")
    print(
        f"final-state lag ms: p50={pct(50):.0f} p95={pct(95):.0f} p99={pct(99):.0f} max={lags[-1] * 1000:.0f} "
        f"mean={statistics.fmean(lags) * 1000:.0f}"
    )
    print(
        f"mirror: {events} events in {len(batches)} batches (mean {events / len(batches):.0f}/batch); "
        f"{events / elapsed:.0f} events/s and {rows / elapsed:.0f} rows/s over the run; "
        f"busy {busy:.1f}s, so capacity ~{rows / busy:.0f} rows/s ({events / busy:.0f} events/s)"
    )


if __name__ == "__main__":
    main()
