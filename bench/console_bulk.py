"""Bulk resubmit benchmark: how long a resubmit of every dead letter takes, run as a bulk operation by a real
`manage.py runworker` while that worker keeps running other jobs.

    .venv/bin/python bench/console_bulk.py [--dead 100000] [--rate 200] [--database-url URL]

1. Loads `--dead` dead letters the real way, in Redis and mirrored: a private redis-server and a fresh database
   (SQLite in WAL mode in a temp dir unless --database-url is given), jobs of `bench.fixable` enqueued while its
   bug is "present", failed by an in-process worker, then mirrored into the database.
2. Starts one runworker (default settings: its task threads, the mirror thread, the system worker) serving
   `examples.echo` first, then `bench.fixable`, and a producer enqueueing `examples.echo` jobs at `--rate` per
   second: the live traffic keeps its place ahead of the resubmitted jobs, which the worker runs with what is left.
3. "Fixes the bug", then previews and confirms a bulk resubmit of every open dead letter (as the console does)
   and polls its progress every second until it is done.
Prints the time to freeze the set (the confirmation request), the time from confirmation to done, the rate, the
other jobs the worker completed meanwhile, and, with --drain, how long until every resubmitted job completed.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BROKEN = Path(os.environ.get("BENCH_BROKEN_FLAG", "/nonexistent"))


def _span(start: datetime | None, end: datetime | None) -> str:
    """Seconds from `start` to `end`, or '-' when the operation never reached one of them."""
    return f"{(end - start).total_seconds():.1f} s" if start and end else "-"


def register_task() -> None:
    """`bench.fixable` fails while the flag file exists (the bug), and succeeds once it is gone (the fix)."""
    from jobconsole.core import task

    @task(name="bench.fixable", max_retries=0)
    def fixable(n: int = 0) -> int:
        if BROKEN.exists():
            raise RuntimeError("the bug the bulk resubmit follows")
        return n


if __name__ != "__main__":  # imported as a task module (JOBCONSOLE_TASK_MODULES), by the worker and by main()
    register_task()


def produce(redis_url: str, rate: int, stop: threading.Event, counter: list[int]) -> None:
    """Enqueue `rate` examples.echo jobs per second, in small batches, until `stop`."""
    from jobconsole.core import Client, JobSpec, default_registry
    from jobconsole.core.connection import connect

    client = Client(connect(redis_url), default_registry)
    started = time.monotonic()
    while not stop.is_set():
        due = int(rate * (time.monotonic() - started)) - counter[0]
        if due > 0:
            client.enqueue_many([JobSpec(task="examples.echo", params={"i": counter[0] + i}) for i in range(due)])
            counter[0] += due
        stop.wait(0.02)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dead", type=int, default=100_000, help="dead letters to load and resubmit")
    parser.add_argument("--rate", type=int, default=200, help="other jobs enqueued per second during the run")
    parser.add_argument("--concurrency", type=int, default=10, help="the worker's task threads")
    parser.add_argument("--database-url", default="", help="default: a fresh SQLite file (WAL)")
    parser.add_argument("--drain", action="store_true", help="also wait for every resubmitted job to complete")
    parser.add_argument(
        "--system-process",
        action="store_true",
        help="serve the system queue from a runworker process of its own (as make run and the Procfile do) "
        "instead of the worker's system thread (runworker's own default)",
    )
    args = parser.parse_args()

    from tests.redis_server import RedisServer

    tmp = Path(tempfile.mkdtemp(prefix="jc-bulk-bench-"))
    broken = tmp / "broken"
    broken.touch()
    server = RedisServer(tmp / "redis", appendfsync="everysec").start()
    env = {**os.environ, "REDIS_URL": server.url, "JOBCONSOLE_VAR_DIR": str(tmp / "var"),
           "DJANGO_SETTINGS_MODULE": "project.settings", "LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT),
           "JOBCONSOLE_TASK_MODULES": "jobconsole.examples,bench.console_bulk", "BENCH_BROKEN_FLAG": str(broken),
           "DEBUG": "false", "SECRET_KEY": os.environ.get("SECRET_KEY") or "bench-only-not-a-secret"}  # fmt: skip
    if args.database_url:
        env["DATABASE_URL"] = args.database_url
    os.environ.update(env)
    (tmp / "var").mkdir()

    import django
    from django.core.management import call_command

    django.setup()
    from django.contrib.auth.models import User
    from django.db import connection

    if args.database_url and connection.vendor == "postgresql":
        call_command("flush", interactive=False, verbosity=0)
    call_command("migrate", verbosity=0)

    from jobconsole.bulk.operations import confirm, preview
    from jobconsole.bulk.progress import progress
    from jobconsole.bulk.selection import Selection
    from jobconsole.bulk.system import SYSTEM_QUEUE
    from jobconsole.core import JobSpec, Worker, default_registry
    from jobconsole.engine import get_client, get_redis
    from jobconsole.mirror.loop import Mirror
    from jobconsole.models import BulkOperation, DeadLetter, Job

    client = get_client()
    print(f"[bench] loading {args.dead:,} dead letters (private redis-server, {connection.vendor} database)")
    loading = time.monotonic()
    for start in range(0, args.dead, 10_000):
        batch = range(start, min(args.dead, start + 10_000))
        client.enqueue_many([JobSpec(task="bench.fixable", params={"n": n}) for n in batch])
    Worker(get_redis(), ["bench.fixable"], default_registry, concurrency=20, burst=True, maintenance=False).run()
    failed_in = time.monotonic() - loading
    mirror = Mirror(get_redis(), batch=2000, block_ms=20)
    mirror.drain()
    dead = DeadLetter.objects.filter(resubmitted_at__isnull=True).count()
    print(f"[bench] {dead:,} dead letters in Redis and the database ({failed_in:.0f} s to fail them, "
          f"{time.monotonic() - loading - failed_in:.0f} s to mirror them)")  # fmt: skip
    assert dead == args.dead, f"expected {args.dead} dead letters, the database has {dead}"

    manage = [sys.executable, str(ROOT / "manage.py"), "runworker"]
    command = [*manage, "--queues", "examples.echo,bench.fixable", "--concurrency", str(args.concurrency),
               "--name", "bench-worker"]  # fmt: skip
    workers = [
        subprocess.Popen([*command, "--no-system-worker"] if args.system_process else command, env=env, cwd=ROOT)
    ]
    if args.system_process:
        system = [*manage, "--queues", SYSTEM_QUEUE, "--no-system-worker", "--no-mirror", "--no-maintenance"]
        workers.append(subprocess.Popen([*system, "--concurrency", "2", "--name", "bench-system"], env=env, cwd=ROOT))
    stop = threading.Event()
    produced = [0]
    producer = threading.Thread(target=produce, args=(server.url, args.rate, stop, produced), daemon=True)
    try:
        time.sleep(2.0)  # the worker starts; the producer's jobs begin to flow
        producer.start()
        time.sleep(2.0)
        broken.unlink()  # the bug is fixed: resubmitted jobs succeed
        operator = User.objects.create_user("bench", is_staff=True, is_superuser=True)
        echo_before = client.counts("examples.echo").completed
        previewing = time.monotonic()
        shown = preview("resubmit", Selection("deadletter"))
        confirming = time.monotonic()
        operation, _ = confirm(shown.token, user=operator, options={})
        confirmed = time.monotonic()
        print(f"[bench] preview {confirming - previewing:.2f} s (count {shown.count:,}); confirm (freeze "
              f"{operation.total:,} ids in {operation.chunks} chunks, record, enqueue) "
              f"{confirmed - confirming:.2f} s")  # fmt: skip
        while True:
            time.sleep(1.0)
            p = progress(operation.pk)
            left = f"{p.seconds_left:.0f} s left" if p.seconds_left is not None else "-"
            rate = f"{p.rate:,.0f}/s" if p.rate else "-"
            print(f"[bench] {time.monotonic() - confirmed:5.1f} s  {p.status:8}  {p.processed:>7,} of {p.total:,} "
                  f"({p.percent}%)  {rate}  {left}", flush=True)  # fmt: skip
            if p.is_finished:
                break
            if time.monotonic() - confirmed > 600:
                raise SystemExit("[bench] no end after 10 minutes")
        finished = time.monotonic()
        op = BulkOperation.objects.get(pk=operation.pk)
        echo_done = client.counts("examples.echo").completed - echo_before
        total = finished - confirmed
        print(f"[bench] bulk resubmit of {op.total:,} dead letters: {op.status} in {total:.1f} s from confirmation "
              f"({op.total / total:,.0f} jobs/s; started {_span(op.created_at, op.started_at)} after it, "
              f"ran {_span(op.started_at, op.finished_at)}); done {op.done:,}, "
              f"refused {op.refused:,}, failed {op.failed:,}, chunks redone {op.redone}")  # fmt: skip
        print(f"[bench] meanwhile the worker completed {echo_done:,} other jobs ({produced[0]:,} enqueued at "
              f"{args.rate}/s)")  # fmt: skip
        if args.drain:
            while client.counts("bench.fixable").completed < op.done:
                time.sleep(1.0)
            print(f"[bench] every resubmitted job completed {time.monotonic() - confirmed:.1f} s after confirmation")
            unfinished = Job.objects.filter(task="bench.fixable").exclude(state="completed").count()
            print(f"[bench] (the mirror shows {unfinished:,} of them not completed yet)")
    finally:
        stop.set()
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=60)
        server.stop()


if __name__ == "__main__":
    main()
