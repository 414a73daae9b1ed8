"""Drain rate of `runworker --processes N`, and of a lone runworker against the Procfile's worker + runmirror pair.

    .venv/bin/python bench/drain_processes.py                       # every setup, in turns, twice
    .venv/bin/python bench/drain_processes.py --setups p1,p2 --repeat 3 --jobs 20000

Each run: a private redis-server and a new migrated SQLite database; the mirror made to know the queue first (one
`runmirror --burst`), so that it follows the jobs as events as a running mirror does; the setup's commands started
on the queue paused; `--jobs` jobs enqueued one by one; once the mirror has them all (a mirror, in a process or a
thread, follows the enqueues in every setup alike), the queue resumed: a backlog to drain. Each job has one dict
parameter of about 130 bytes (`{"i": <int>, "pad": <100 characters>, "n": <int>}`) and makes one INCR; the clock
runs from the (jobs/100)-th completion to the last, both stamped by the task, so start-up is left out; over about
the same span, the CPU time per job of the worker's process tree (the mirror's with it) and of redis-server. The
setups:

- p1, p2: `runworker --processes 1|2 --no-mirror` (the engine alone: how the processes scale);
- lone: `runworker` as a user types it (its supervisor runs the mirror in a process of its own);
- pair: the Procfile's way, `runworker --no-mirror` beside `runmirror`;
- thread: the mirror in a thread of the worker, as a lone runworker ran it before `--processes` (a one-off
  runworker, `--max-tasks`, still does).

With a mirror, a run also waits for the database to hold every job completed and reports the mirror's lag per job
(p50, p99). Setups take turns, so the ratio of two is taken in the
same moments; `uptime` is printed at the start and the end.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from jobconsole.core import Client, task  # noqa: E402 - the workers import this module for its task
from jobconsole.core.connection import connect  # noqa: E402

QUEUE = "bench"
COUNT_KEY, MARK_KEY, LAST_KEY = "bench:done", "bench:t_mark", "bench:t_last"
SETUPS: dict[str, tuple[list[str], bool]] = {  # runworker's arguments; a runmirror beside it
    "p1": (["--processes", "1", "--no-mirror"], False),
    "p2": (["--processes", "2", "--no-mirror"], False),
    "lone": ([], False),
    "pair": (["--no-mirror"], True),
    "thread": (["--max-tasks", "1000000000"], False),  # a one-off runworker keeps the mirror in a thread: the old way
}
MIRRORED = ("lone", "pair", "thread")
_redis: dict[int, "redis.Redis"] = {}  # one connection per worker process


def _bench_redis() -> "redis.Redis":
    client = _redis.get(os.getpid())
    if client is None:
        client = _redis[os.getpid()] = redis.Redis.from_url(os.environ["REDIS_URL"])
    return client


@task(name="bench.drain", queue=QUEUE)
def drain(**params: Any) -> None:
    client = _bench_redis()
    done = client.incr(COUNT_KEY)
    if done == int(os.environ["BENCH_MARK_AT"]):
        client.set(MARK_KEY, time.time())
    if done == int(os.environ["BENCH_JOBS"]):
        client.set(LAST_KEY, time.time())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(roots: list[int]) -> float:
    """CPU time (user + system) of these processes and every process below them."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
            times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    tree, todo = set(roots), list(roots)
    while todo:
        parent = todo.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                todo.append(pid)
    return sum(times.get(pid, 0.0) for pid in tree)


def manage(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "manage.py"), *args]


def run_once(setup: str, jobs: int, work: Path) -> dict[str, float]:
    worker_args, with_runmirror = SETUPS[setup]
    port = free_port()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
    )
    env = {
        **os.environ,
        "REDIS_URL": f"redis://127.0.0.1:{port}/0",
        "DATABASE_URL": f"sqlite:///{work / 'db.sqlite3'}",
        "JOBCONSOLE_VAR_DIR": str(work / "var"),
        "JOBCONSOLE_TASK_MODULES": "drain_processes",
        "PYTHONPATH": f"{ROOT / 'bench'}:{ROOT}",
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "SECRET_KEY": "bench-only-not-a-secret",
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        "BENCH_JOBS": str(jobs),
        "BENCH_MARK_AT": str(max(1, jobs // 100)),
    }
    procs: list[subprocess.Popen[bytes]] = []
    try:
        client = redis.Redis(port=port)
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        subprocess.run(manage("migrate", "--noinput"), env=env, check=True, stdout=subprocess.DEVNULL)
        enqueue = (
            "from jobconsole.core import Client, keys\nfrom jobconsole.core.connection import connect\n"
            "import os, sys\nc = Client(connect(os.environ['REDIS_URL']))\nc.redis.sadd(keys.QUEUES, 'bench')\n"
            "pad = 'x' * 100\nfor i in range(int(sys.argv[1])): c.enqueue('bench.drain', {'i': i, 'pad': pad, 'n': i})"
        )
        subprocess.run(manage("runmirror", "--burst"), env=env, check=True, stdout=subprocess.DEVNULL)
        # Every process starts before the first enqueue, on a paused queue: the mirror (a process or a thread)
        # follows the enqueues as it does in production, and the workers drain a backlog once it is resumed.
        engine = Client(connect(env["REDIS_URL"]))
        engine.pause(QUEUE)
        log = (work / "log").open("wb")
        if with_runmirror:
            procs.append(subprocess.Popen(manage("runmirror"), env=env, stdout=log, stderr=subprocess.STDOUT))
        procs.append(
            subprocess.Popen(
                manage("runworker", "--queues", QUEUE, *worker_args), env=env, stdout=log, stderr=subprocess.STDOUT
            )
        )
        processes = 2 if "2" in worker_args else 1
        started = time.monotonic()
        while len([w for w in engine.queries.workers.all() if w.queues == [QUEUE]]) < processes:
            if time.monotonic() - started > 120 or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"{setup}: the workers did not start; see {work / 'log'}")
            time.sleep(0.1)
        subprocess.run(
            [sys.executable, "-c", "import django; django.setup()\n" + enqueue, str(jobs)],
            env=env, check=True, cwd=ROOT / "bench",
        )  # fmt: skip
        if setup in MIRRORED:
            mirrored(env, jobs, "queued")  # the mirror has caught up with the enqueues
        engine.resume(QUEUE)
        started = time.monotonic()
        measured = [p.pid for p in procs]  # the worker (and mirror) processes, their children with them
        cpu_at_mark: tuple[float, float] | None = None
        while client.get(LAST_KEY) is None:
            if time.monotonic() - started > 300 or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"{setup}: no end; see {work / 'log'}")
            if cpu_at_mark is None and client.exists(MARK_KEY):
                cpu_at_mark = cpu_seconds(measured), cpu_seconds([server.pid])
            time.sleep(0.02)
        cpu_at_last = cpu_seconds(measured), cpu_seconds([server.pid])
        mark, last = float(client.get(MARK_KEY) or 0), float(client.get(LAST_KEY) or 0)
        counted = jobs - int(env["BENCH_MARK_AT"])
        result = {"jobs_per_s": counted / (last - mark)}
        if cpu_at_mark is not None:  # µs per job, from about the mark to the end (sampled every 20 ms)
            result["worker_cpu_us"] = (cpu_at_last[0] - cpu_at_mark[0]) / counted * 1e6
            result["redis_cpu_us"] = (cpu_at_last[1] - cpu_at_mark[1]) / counted * 1e6
        if setup in MIRRORED:
            result.update(settle(env, jobs))
        return result
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        server.terminate()
        server.wait()


def mirrored(env: dict[str, str], jobs: int, state: str) -> str:
    """Wait until the database holds all `jobs` jobs in `state` (at most 120 s); the query's last line."""
    query = (
        "import django, statistics, sys, time; django.setup()\nfrom jobconsole.models import Job\n"
        "rows = Job.objects.filter(queue='bench', state=sys.argv[2])\n"
        "deadline = time.monotonic() + 120\n"
        "while rows.count() < int(sys.argv[1]) and time.monotonic() < deadline: time.sleep(0.02)\n"
        "at = time.time()\n"
        "lags = [(s - f).total_seconds() * 1000 for f, s in rows.values_list('finished_at', 'synced_at') if f]\n"
        "q = statistics.quantiles(lags, n=100) if len(lags) > 1 else [0.0] * 99\n"
        "print(at, q[49], q[98])"
    )
    command = [sys.executable, "-c", query, str(jobs), state]
    return subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]


def settle(env: dict[str, str], jobs: int) -> dict[str, float]:
    """Once the database holds every job completed: the mirror's lag per job (synced_at - finished_at: when it read
    the job's final state, after its end), p50 and p99 in ms."""
    _, p50, p99 = (float(v) for v in mirrored(env, jobs, "completed").split())
    return {"mirror_lag_p50_ms": p50, "mirror_lag_p99_ms": p99}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setups", default="p1,p2,lone,pair,thread")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    setups = [s for s in args.setups.split(",") if s]
    unknown = [s for s in setups if s not in SETUPS]
    if unknown:
        sys.exit(f"unknown setups {unknown}: choose among {', '.join(SETUPS)}")
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    with tempfile.TemporaryDirectory(prefix="drain-") as tmp:
        for turn in range(1, args.repeat + 1):
            for setup in setups:
                result = run_once(setup, args.jobs, Path(tmp) / setup)
                shown = "  ".join(f"{k}={v:,.2f}" for k, v in result.items())
                print(f"turn {turn} {setup:>4}: {shown}", flush=True)
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
