"""Jobconsole adapter: the project's own engine, run as the Procfile ships it.

Run with the project's .venv python; see _common.py for the CLI and method. Every reliability feature stays on:
leases and heartbeats, attempt history, per-minute stats, and the mirror's event stream.
JOBCONSOLE_BENCH_VARIANT picks what runs beside Redis (run_peers.py names the rows):

- ``defaults`` (row ``jobconsole``): the Procfile's ``worker:`` command with ``--queues bench`` and its ``mirror:``
  command (one ``manage.py runmirror``), both read from the Procfile at run time, on a fresh database: a new SQLite
  file under var/bench/jobconsole, or JOBCONSOLE_BENCH_DATABASE_URL (row ``jobconsole+pg``), migrated and flushed.
- ``engine`` (row ``jobconsole-engine``): the Procfile's worker with ``--no-mirror``, no mirror anywhere.
- ``thread`` (row ``jobconsole+thread``, named when the mirror was a thread): a plain ``manage.py runworker --queues
  bench`` with JOBCONSOLE_MIRROR_IN_WORKER=1, what a lone runworker does: its supervisor runs the mirror in a child
  process.

A row can also be given as command lines (run_peers.py --jc-row): JOBCONSOLE_BENCH_WORKER_CMD, a ``manage.py ...``
command line (``--queues bench`` appended; with ``{processes}`` in it, one such command runs N processes, else N
copies run), and JOBCONSOLE_BENCH_SERVICE_CMD, the process beside them (``manage.py runmirror``; empty: none).

With a mirror, each run waits until the database holds every job completed and reports the mirror's lag.
"""

from __future__ import annotations

import os
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if __name__ == "__main__":  # delegate so the worker and we share one module name
    from _common import main

    sys.exit(main("jobconsole_bench"))

sys.path.insert(0, str(ROOT))

from _common import PAYLOAD, Peer, in_batches, record_job, redis_url, task_client  # noqa: E402

from jobconsole.core import Client, JobSpec, keys, task  # noqa: E402
from jobconsole.core.client import DEFAULT_SPIN_US  # noqa: E402
from jobconsole.core.connection import connect  # noqa: E402

QUEUE = "bench"
VARIANTS = ("defaults", "engine", "thread")
# JOBCONSOLE_BENCH_MIRROR=1 is how older commits' adapters were asked for the mirror in the workers.
VARIANT = os.environ.get("JOBCONSOLE_BENCH_VARIANT") or (
    "thread" if os.environ.get("JOBCONSOLE_BENCH_MIRROR") == "1" else "defaults"
)
if VARIANT not in VARIANTS:
    raise SystemExit(f"JOBCONSOLE_BENCH_VARIANT={VARIANT!r}: not one of {', '.join(VARIANTS)}")
WORKER_CMD = os.environ.get("JOBCONSOLE_BENCH_WORKER_CMD", "")  # empty: the VARIANT's
SERVICE_CMD = os.environ.get("JOBCONSOLE_BENCH_SERVICE_CMD")  # unset: the VARIANT's; empty: none
PROCESSES = "{processes}"  # in WORKER_CMD: the command runs that many worker processes itself
DATABASE_URL = os.environ.get("JOBCONSOLE_BENCH_DATABASE_URL", "")
CONCURRENCY = os.environ.get("JOBCONSOLE_BENCH_CONCURRENCY", "")  # unset: runworker's own default
SPIN_US = int(os.environ.get("JOBCONSOLE_CLIENT_SPIN_US", DEFAULT_SPIN_US))  # as the Django setting reads it
VAR_DIR = ROOT / "var" / "bench" / "jobconsole"
SQLITE_FILE = VAR_DIR / "bench.sqlite3"
SETTLE_TIMEOUT_S = 60.0

# What the worker and mirror processes inherit (worker_env copies os.environ): production settings (DEBUG off).
os.environ.update(
    REDIS_URL=redis_url(),
    JOBCONSOLE_TASK_MODULES="jobconsole_bench",
    JOBCONSOLE_VAR_DIR=str(VAR_DIR),
    DATABASE_URL=DATABASE_URL or f"sqlite:///{SQLITE_FILE}",
    LOG_LEVEL=os.environ.get("BENCH_LOG_LEVEL", "WARNING"),
    DJANGO_SETTINGS_MODULE="project.settings",
    DEBUG="0",
    SECRET_KEY=os.environ.get("SECRET_KEY") or "bench-only-not-a-secret",
)
if VARIANT == "defaults":
    os.environ.pop("JOBCONSOLE_MIRROR_IN_WORKER", None)  # the shipped default
else:
    os.environ["JOBCONSOLE_MIRROR_IN_WORKER"] = "1" if VARIANT == "thread" else "0"


@task(name="bench.noop", queue=QUEUE)
def noop(t_enq: float | None = None, **params: Any) -> None:
    record_job(task_client(), t_enq)


# --------------------------------------------------------------------------
# What runs: the Procfile's commands.
# --------------------------------------------------------------------------


def procfile() -> dict[str, list[str]]:
    """The Procfile's process types and their commands."""
    types: dict[str, list[str]] = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        name, sep, command = line.partition(":")
        if sep and name.strip() and not name.lstrip().startswith("#"):
            types[name.strip()] = shlex.split(command)
    return types


def manage_command(argv: list[str]) -> list[str]:
    """`python manage.py ...` with this venv's python and this checkout's manage.py."""
    if len(argv) < 3 or Path(argv[0]).name not in ("python", "python3") or argv[1] != "manage.py":
        raise RuntimeError(f"Procfile command not of the form 'python manage.py ...': {shlex.join(argv)}")
    return [sys.executable, str(ROOT / "manage.py"), *argv[2:]]


def without_option(argv: list[str], option: str) -> list[str]:
    """argv without `option VALUE` and `option=VALUE`."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == option:
            skip = True
        elif not arg.startswith(f"{option}="):
            out.append(arg)
    return out


def command_line(line: str) -> list[str]:
    """A `manage.py ...` command line of a --jc-row, run with this venv's python and this checkout's manage.py."""
    argv = shlex.split(line)
    if not argv or Path(argv[0]).name != "manage.py":
        raise SystemExit(f"not a 'manage.py ...' command line: {line!r}")
    return [sys.executable, str(ROOT / "manage.py"), *argv[1:]]


def worker_argv(processes: int = 1) -> list[str]:
    """The worker's command, serving only the benchmark's queue."""
    if WORKER_CMD:
        argv = command_line(WORKER_CMD.replace(PROCESSES, str(processes)))
    elif VARIANT == "thread":
        argv = [sys.executable, str(ROOT / "manage.py"), "runworker"]
    else:
        argv = manage_command(procfile()["worker"])
        argv = without_option(without_option(argv, "--queues"), "--role")
        if VARIANT == "engine" and "--no-mirror" not in argv:
            argv.append("--no-mirror")
    argv += ["--queues", QUEUE]
    if CONCURRENCY:
        argv += ["--concurrency", CONCURRENCY]
    return argv


def mirror_argv() -> list[str] | None:
    """The Procfile's mirror process, for the defaults (None if the Procfile has none), or the row's service."""
    if SERVICE_CMD is not None:
        return command_line(SERVICE_CMD) if SERVICE_CMD.strip() else None
    if VARIANT != "defaults" or "mirror" not in procfile():
        return None
    return manage_command(procfile()["mirror"])


HAS_MIRROR = VARIANT == "thread" or mirror_argv() is not None or "--no-mirror" not in worker_argv()


def display(argv: list[str]) -> str:
    return shlex.join(["manage.py", *argv[2:]] if argv[:1] == [sys.executable] else argv)


# --------------------------------------------------------------------------
# The database and the mirror's lag.
# --------------------------------------------------------------------------


def _django() -> None:
    import django

    django.setup()


def prepare_database() -> None:
    """A fresh database for every run: a new SQLite file, or the PostgreSQL database migrated and flushed."""
    if not DATABASE_URL:
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{SQLITE_FILE}{suffix}").unlink(missing_ok=True)
    _django()
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", verbosity=0, interactive=False)
    if DATABASE_URL:
        call_command("flush", verbosity=0, interactive=False)
    connections.close_all()


def mirror_leading() -> bool:
    """The mirror process holds the leader lock and follows the bench queue, as a mirror that has been running
    does: the queue is made known first, so that the mirror meets its jobs as events (a queue it first meets
    with 20,000 jobs in it is resynchronised from the Redis sets instead, which is not what runs in production)."""
    client = task_client()
    client.sadd(keys.QUEUES, QUEUE)
    if not client.exists(keys.lock_key("mirror")):
        return False
    _django()
    from django.db import connections

    from jobconsole.models import MirrorCursor

    try:
        return MirrorCursor.objects.filter(queue=QUEUE).exists()
    finally:
        connections.close_all()


def percentile(values: list[float], pct: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


def settle(jobs: int) -> dict[str, Any]:
    """Wait until the database holds all `jobs` jobs completed, then each job's lag: synced_at - finished_at."""
    from django.db import connections

    from jobconsole.models import Job

    done = Job.objects.filter(queue=QUEUE, state="completed")
    t0 = time.monotonic()
    while (count := done.count()) < jobs:
        if time.monotonic() - t0 > SETTLE_TIMEOUT_S:
            raise RuntimeError(f"mirror: {count} of {jobs} jobs completed in the database after {SETTLE_TIMEOUT_S}s")
        time.sleep(0.01)
    all_visible = time.time()
    waited = time.monotonic() - t0
    rows = [(f, s) for f, s in done.values_list("finished_at", "synced_at") if f is not None and s is not None]
    connections.close_all()
    lags = sorted((synced - finished).total_seconds() * 1000 for finished, synced in rows)
    last_finished = max(finished for finished, _ in rows).timestamp()
    result: dict[str, Any] = {
        # synced_at: when the mirror read the job's final state; the batch's commit follows it.
        "mirror_lag_p50_ms": round(percentile(lags, 50), 1),
        "mirror_lag_p99_ms": round(percentile(lags, 99), 1),
        "mirror_lag_max_ms": round(lags[-1], 1),
        # The last job's finish to the moment this process saw every row committed (polled every 10 ms).
        "mirror_last_commit_ms": round((all_visible - last_finished) * 1000, 1),
        "mirror_settle_s": round(waited, 2),
    }
    if jobs <= 1000:  # a latency run: run_peers.py pools its rounds' lags
        result["mirror_lags_ms"] = [round(v, 2) for v in lags]
    return result


# --------------------------------------------------------------------------
# The producer's side.
# --------------------------------------------------------------------------

_client: Client | None = None


def client() -> Client:
    global _client
    if _client is None:
        _client = Client(connect(redis_url()), spin_us=SPIN_US)
    return _client


def enqueue_single(n: int) -> None:
    c = client()
    for _ in range(n):
        c.enqueue("bench.noop", PAYLOAD)


def enqueue_probe() -> None:
    client().enqueue("bench.noop", {"t_enq": time.time(), **PAYLOAD})


def enqueue_bulk(n: int) -> None:
    c = client()
    for size in in_batches(n):
        c.enqueue_many([JobSpec(task="bench.noop", params=PAYLOAD)] * size, batch_size=size)


def worker_commands(workers: int) -> list[list[str]]:
    if PROCESSES in WORKER_CMD:
        return [worker_argv(workers)]
    argv = worker_argv()
    if not WORKER_CMD and any(a == "--processes" or a.startswith("--processes=") for a in argv):
        # The Procfile's worker supervises its own processes (`--processes auto`: one per core). A cell of N worker
        # processes runs it once with `--processes N`: N copies would each start one per core.
        return [[*without_option(argv, "--processes"), "--processes", str(workers)]]
    return [worker_argv() for _ in range(workers)]


def services() -> list[list[str]]:
    argv = mirror_argv()
    return [argv] if argv else []


def database_label() -> str:
    if not HAS_MIRROR:
        return "none (no mirror)"
    if DATABASE_URL:
        scheme, _, rest = DATABASE_URL.partition("://")
        return f"{scheme}://{rest.rpartition('@')[2]} (migrated and flushed before the run)"
    return f"a new SQLite file ({SQLITE_FILE.relative_to(ROOT)}), WAL"


def config(workers: int) -> dict[str, Any]:
    mirror = mirror_argv()
    if mirror:
        where = f"one process: {display(mirror)} (the Procfile's mirror:), running for the whole measurement"
    elif HAS_MIRROR:
        where = "in each runworker: a child process of its supervisor, a thread in a one-off run (one leader overall)"
    else:
        where = "none (--no-mirror; the event stream is still written)"
    return {
        "variant": VARIANT,
        "worker_cmd": " + ".join(display(argv) for argv in worker_commands(workers)),
        "mirror": where,
        "database": database_label(),
        "log_level": "WARNING",
        "reliability": "leases+heartbeats, attempt history, stats, event stream all on",
        "client_spin_us": SPIN_US,
    }


def row_name() -> str:
    name = {"defaults": "jobconsole", "engine": "jobconsole-engine", "thread": "jobconsole+thread"}[VARIANT]
    return f"{name}+pg" if DATABASE_URL and HAS_MIRROR and DATABASE_URL.startswith("postgres") else name


PEER = Peer(
    name=row_name(),
    version="main",
    enqueue_single=enqueue_single,
    enqueue_probe=enqueue_probe,
    enqueue_bulk=enqueue_bulk,
    bulk_api="Client.enqueue_many: 1000 jobs a call, pipelined scripts of 250 jobs",
    worker_commands=worker_commands,
    config=config,
    services=services if mirror_argv() else None,
    prepare=prepare_database if HAS_MIRROR else None,
    services_ready=mirror_leading if mirror_argv() else None,
    settle=settle if HAS_MIRROR else None,
)
