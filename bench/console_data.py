"""The data set of bench/console_pages.py: a private redis-server kept in a directory, and the load phase that
fills it (1,000,000 waiting jobs, 100,000 dead letters, some running, scheduled and completed jobs) and mirrors
it into the database.

The load phase runs in the benchmark's own process after django.setup(): it writes through the engine's Client
and the management commands (runworker, runmirror), the way an application and its workers would.
"""

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MARKER = "loaded.json"
MARKER_VERSION = 1
RDB = "redis.rdb"

# Queues of the data set. Nothing serves BACKLOG, so its million jobs stay waiting.
BACKLOG = "bench.backlog"
PAYMENTS = "bench.payments"  # examples.fail dead letters, a few distinct messages
IMPORTS = "bench.imports"  # examples.flaky dead letters (another top frame, so another fingerprint)
LOST = "bench.lost"  # jobs whose worker was killed, dead-lettered by the recoverer (WorkerLost)
SLOW = "bench.slow"  # long examples.sleep jobs: some stalled (worker killed), some waiting for a live worker
DONE = "bench.done"  # completed examples.echo jobs
LATER = "bench.later"  # examples.echo jobs delayed by an hour to a week

REGIONS = ["eu-west", "us-east", "ap-south", "sa-east"]
CUSTOMERS = 50_000
FIRST_ORDER = 1_000_000
UNIQUE_EVERY = 100  # every 100th waiting job carries a unique key
PAYMENT_ERRORS = [
    "card declined by issuer (order {n})",
    "payment gateway timeout after 30 s (order {n})",
    "insufficient funds (order {n})",
    "fraud check rejected order {n}",
    "currency EUR is not enabled for this merchant (order {n})",
    "3-D Secure challenge expired (order {n})",
]
STALLED = 20  # examples.sleep jobs left running by a killed worker (their leases run out: stalled)
SLOW_WAITING = 10  # more of them waiting, for the live worker of the measure phase
LOST_JOBS = 50
COMPLETED = 10_000
SCHEDULED = 2_000
AUDIT_RECORDS = 5_000
ENQUEUE_CHUNK = 10_000


def log(message: str) -> None:
    print(f"[console_pages] {message}", file=sys.stderr, flush=True)


# --- the private redis-server ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ping(port: int) -> bytes:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64)
    except OSError:
        return b""


class RedisProcess:
    """A redis-server on a free port whose data lives in `directory` as an RDB file: it loads that file when it
    starts, saves it when stopped with `stop(save=True)` (SIGTERM with a save point configured), and leaves it
    as it was with `stop(save=False)` (SIGKILL), so a measure run never changes the loaded data set."""

    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.dir = directory
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, port: int = 0) -> "RedisProcess":
        """Start on `port` (a restart keeps its port, so clients reconnect), by default a free one."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        argv = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.dir),
            "--dbfilename",
            RDB,
            "--save",
            "86400 1",
            "--appendonly",
            "no",
            "--maxmemory-policy",
            "noeviction",
            "--logfile",
            str(self.dir / "redis.log"),
        ]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 300  # loading a big RDB file takes a while
        while not _ping(self.port).startswith(b"+PONG"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start; see {self.dir / 'redis.log'}")
            time.sleep(0.1)
        return self

    def stop(self, *, save: bool) -> None:
        if self.proc is None:
            return
        if save:
            self.proc.terminate()
            self.proc.wait(timeout=600)
        else:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


# --- the environment every process of the benchmark shares -----------------------------------------------------


def bench_env(data_dir: Path, redis_url: str, database_url: str) -> dict[str, str]:
    env = {
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DEBUG": "1",  # as asked: the console with DEBUG on (it records every query, which the report uses)
        "REDIS_URL": redis_url,
        "JOBCONSOLE_VAR_DIR": str(data_dir),  # the shipped default database is SQLite in there
        "ALLOWED_HOSTS": "testserver,127.0.0.1,localhost",
        "LOG_LEVEL": "WARNING",
        "JOBCONSOLE_MIRROR_IN_WORKER": "false",
        "PYTHONPATH": str(ROOT),
        "SECRET_KEY": os.environ.get("SECRET_KEY") or "bench-only-not-a-secret",
    }
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def manage(args: list[str], env: dict[str, str], log_file: Path) -> subprocess.Popen[bytes]:
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        return subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), *args],
            env={**os.environ, **env},
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


# --- the marker: what was loaded, and how long each step took ------------------------------------------------


@dataclass
class Loaded:
    jobs: int
    dead: int
    database: str  # vendor and name, never a password
    loaded_at: str = ""
    steps: dict[str, float] = field(default_factory=dict)  # seconds per load step, in order
    version: int = MARKER_VERSION

    def save(self, data_dir: Path) -> None:
        (data_dir / MARKER).write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def read(cls, data_dir: Path) -> "Loaded | None":
        try:
            raw = json.loads((data_dir / MARKER).read_text())
            loaded = cls(**raw)
        except (OSError, ValueError, TypeError):
            return None
        return loaded if loaded.version == MARKER_VERSION and (data_dir / RDB).exists() else None


def database_label(database_url: str, data_dir: Path) -> str:
    if not database_url:
        return f"sqlite:{data_dir / 'jobconsole.sqlite3'}"
    from urllib.parse import urlsplit

    parts = urlsplit(database_url)
    return f"{parts.scheme}://{parts.hostname or ''}{':' + str(parts.port) if parts.port else ''}{parts.path}"


def clear(data_dir: Path) -> None:
    """Everything a load leaves in the directory (an external database is flushed by the load itself)."""
    for name in (MARKER, RDB, "jobconsole.sqlite3", "jobconsole.sqlite3-wal", "jobconsole.sqlite3-shm"):
        (data_dir / name).unlink(missing_ok=True)
    shutil.rmtree(data_dir / "logs", ignore_errors=True)


# --- the load phase -----------------------------------------------------------------------------------------


class Steps:
    """Times each load step and prints it as it ends."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        log(f"load: {name} ...")
        started = time.monotonic()
        yield
        self.seconds[name] = round(time.monotonic() - started, 1)
        log(f"load: {name}: {self.seconds[name]:.1f} s")


def waiting_params(i: int) -> dict[str, Any]:
    """Realistic small parameters: three fields, a customer shared by 20 jobs, an order number, a region."""
    return {"customer": f"c{(i * 7919) % CUSTOMERS:05d}", "order": FIRST_ORDER + i, "region": REGIONS[i % 4]}


def unique_key(i: int) -> str:
    return f"order-{FIRST_ORDER + i}"


def load(data_dir: Path, env: dict[str, str], jobs: int, dead: int, workers: int, database_url: str) -> Loaded:
    """Fill the running private Redis and the (empty or flushed) database. Django is set up already."""
    from django.core.management import call_command
    from django.db import connection

    from jobconsole.core import JobSpec
    from jobconsole.engine import get_client

    steps = Steps()
    client = get_client()
    logs = data_dir / "logs"

    with steps.step("migrate the database"):
        if database_url and connection.vendor != "sqlite":
            call_command("flush", interactive=False, verbosity=0)
        call_command("migrate", verbosity=0)

    with steps.step(f"enqueue {jobs:,} waiting jobs"):
        _enqueue(
            client,
            jobs,
            lambda i: JobSpec(
                task="examples.echo",
                params=waiting_params(i),
                queue=BACKLOG,
                unique_key=unique_key(i) if i % UNIQUE_EVERY == 0 else None,
            ),
        )
    with steps.step("materialize the intake"):
        for queue in client.queries.queues.names():
            client.materialize(queue)

    with steps.step(f"make {dead:,} dead letters"):
        lost = min(LOST_JOBS, dead)
        failing = dead - lost
        _enqueue(client, failing, _failing_spec)
        _run_burst_workers(
            [PAYMENTS, IMPORTS],
            workers,
            env,
            logs / "dead-letters.log",
            client,
            lambda: sum(client.queries.queues.counts(q).dead for q in (PAYMENTS, IMPORTS)),
            failing,
        )
        _lost_jobs(client, env, logs / "killed-worker.log", lost)

    with steps.step(f"complete {COMPLETED:,} jobs"):
        _enqueue(client, COMPLETED, lambda i: JobSpec(task="examples.echo", params=waiting_params(i), queue=DONE))
        _run_burst_workers(
            [DONE],
            1,
            env,
            logs / "completed.log",
            client,
            lambda: client.queries.queues.counts(DONE).completed,
            COMPLETED,
        )

    with steps.step(f"schedule {SCHEDULED:,} jobs"):
        week = 7 * 86_400
        _enqueue(
            client,
            SCHEDULED,
            lambda i: JobSpec(
                task="examples.echo", params=waiting_params(i), queue=LATER, delay=3600 + (week - 3600) * i / SCHEDULED
            ),
        )

    with steps.step("mirror into the database"):
        _mirror(client, env, logs / "mirror.log")

    with steps.step(f"write {AUDIT_RECORDS:,} audit records"):
        _audit_records(AUDIT_RECORDS)

    if connection.vendor == "postgresql":
        # Fresh rows have neither statistics nor a visibility map: the planner then scans tables whose index-only
        # scans a deployment gets (dead letters grouped by cause: 220 ms instead of 48).
        with steps.step("VACUUM ANALYZE (what autovacuum does in a deployment)"), connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")

    counts = {q: client.queries.queues.counts(q) for q in client.queries.queues.names()}
    log(
        "loaded: "
        + "; ".join(
            f"{q} queued={c.queued} running={c.running} scheduled={c.scheduled} dead={c.dead} completed={c.completed}"
            for q, c in counts.items()
        )
    )
    assert counts[BACKLOG].queued == jobs, counts[BACKLOG]
    assert sum(c.dead for c in counts.values()) == dead, "not every failing job was dead-lettered"
    assert counts[SLOW].running == STALLED, counts[SLOW]
    return Loaded(
        jobs=jobs,
        dead=dead,
        database="",
        loaded_at=datetime.now(UTC).isoformat(timespec="seconds"),
        steps=steps.seconds,
    )


def _enqueue(client: Any, n: int, spec: Callable[[int], Any]) -> None:
    from tqdm import tqdm

    with tqdm(total=n, unit="job", unit_scale=True, file=sys.stderr, leave=False) as bar:
        for start in range(0, n, ENQUEUE_CHUNK):
            batch = [spec(i) for i in range(start, min(n, start + ENQUEUE_CHUNK))]
            client.enqueue_many(batch, batch_size=1000)
            bar.update(len(batch))


def _failing_spec(i: int) -> Any:
    """Nine in ten fail in examples.fail with one of a few messages, one in ten in examples.flaky."""
    from jobconsole.core import JobSpec

    if i % 10 == 9:
        return JobSpec(task="examples.flaky", params={"failures": 5}, queue=IMPORTS, max_retries=0)
    message = PAYMENT_ERRORS[i % len(PAYMENT_ERRORS)].format(n=FIRST_ORDER + i)
    return JobSpec(task="examples.fail", params={"message": message}, queue=PAYMENTS, max_retries=0)


def _run_burst_workers(
    queues: list[str], n: int, env: dict[str, str], log_file: Path, client: Any, done: Callable[[], int], total: int
) -> None:
    from tqdm import tqdm

    argv = ["runworker", "--queues", ",".join(queues), "--burst", "--no-mirror", "--no-maintenance"]
    procs = [manage(argv, env, log_file) for _ in range(n)]
    with tqdm(total=total, unit="job", unit_scale=True, file=sys.stderr, leave=False) as bar:
        while any(p.poll() is None for p in procs):
            time.sleep(0.5)
            bar.update(done() - bar.n)
        bar.update(done() - bar.n)
    failed = [p.returncode for p in procs if p.returncode != 0]
    if failed or done() < total:
        raise RuntimeError(f"burst workers exited {failed or 0} with {done()} of {total} done; see {log_file}")


def _lost_jobs(client: Any, env: dict[str, str], log_file: Path, lost: int) -> None:
    """A worker running long jobs is killed: those of LOST (no retries) are dead-lettered by the recoverer
    (WorkerLost), those of SLOW stay running with leases that ran out (stalled), more of SLOW wait."""
    from jobconsole.conf import retention
    from jobconsole.core import JobSpec
    from jobconsole.core.maintenance import Maintenance
    from jobconsole.engine import get_redis

    specs = [JobSpec(task="examples.sleep", params={"seconds": 86_400}, queue=LOST, max_retries=0) for _ in range(lost)]
    specs += [JobSpec(task="examples.sleep", params={"seconds": 86_400}, queue=SLOW) for _ in range(STALLED)]
    client.enqueue_many(specs)
    concurrency = lost + STALLED
    worker = manage(
        [
            "runworker",
            "--queues",
            f"{LOST},{SLOW}",
            "--no-mirror",
            "--no-maintenance",
            "--concurrency",
            str(concurrency),
        ],
        env,
        log_file,
    )
    deadline = time.monotonic() + 60
    while client.queries.queues.counts(LOST).running + client.queries.queues.counts(SLOW).running < concurrency:
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the worker of the long jobs did not start them all; see {log_file}")
        time.sleep(0.2)
    worker.kill()
    worker.wait()
    client.enqueue_many(
        [JobSpec(task="examples.sleep", params={"seconds": 86_400}, queue=SLOW) for _ in range(SLOW_WAITING)]
    )
    logging.getLogger("jobconsole.core.maintenance").setLevel(logging.ERROR)  # not a line per recovered job
    maintenance = Maintenance(get_redis(), retention=retention())
    deadline = time.monotonic() + 60  # examples.sleep has a 10 s lease
    while client.queries.queues.counts(LOST).dead < lost:
        if time.monotonic() > deadline:
            raise RuntimeError("the recoverer did not dead-letter the killed worker's jobs")
        maintenance.recover(LOST)
        time.sleep(0.5)


def _mirror(client: Any, env: dict[str, str], log_file: Path) -> None:
    """runmirror --burst, with the rows it has written as progress."""
    from tqdm import tqdm

    from jobconsole.models import Job

    total = sum(len(client.queries.jobs.ids(q)) for q in client.queries.queues.names())
    proc = manage(["runmirror", "--burst"], env, log_file)
    with tqdm(total=total, unit="row", unit_scale=True, file=sys.stderr, leave=False) as bar:
        while proc.poll() is None:
            time.sleep(2.0)
            bar.update(Job.objects.count() - bar.n)
    if proc.returncode != 0:
        raise RuntimeError(f"runmirror --burst exited {proc.returncode}; see {log_file}")
    mirrored = Job.objects.count()
    if mirrored < total:
        raise RuntimeError(f"the mirror wrote {mirrored} job rows of {total}; see {log_file}")


def _audit_records(n: int) -> None:
    """Months of operator actions: pauses, resubmits, purges, spread over 90 days."""
    from datetime import timedelta

    from django.utils import timezone

    from jobconsole.models import AuditLog

    actions = ["pause", "resume", "resubmit", "purge", "retry", "cancel", "delete", "edit"]
    actors = ["alice", "bob", "carol", "ops-bot"]
    records = AuditLog.objects.bulk_create(
        AuditLog(
            actor=actors[i % len(actors)],
            action=actions[i % len(actions)],
            queue=PAYMENTS,
            filter={"queue": PAYMENTS},
            count=(i * 37) % 500,
            reason="bench",
        )
        for i in range(n)
    )
    now = timezone.now()
    for i, record in enumerate(records):
        record.at = now - timedelta(seconds=90 * 86_400 * i / n)  # auto_now_add set them all to now
    AuditLog.objects.bulk_update(records, ["at"], batch_size=1000)
