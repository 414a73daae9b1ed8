"""Shared harness for the peer adapters in bench/peers/<name>_bench.py.

Each adapter runs under its peer's own venv python and defines a ``PEER``
(:class:`Peer`) plus the task its worker executes.  This module supplies the
rest, identically for every peer:

* the CLI (``--redis-url --jobs --workers --mode``) and the one-line JSON result,
* the task-side bookkeeping (one INCR per job; the two marked jobs one SET of a timestamp),
* starting the peer's real worker CLI and always killing it afterwards,
* the four measurements (enqueue_single, enqueue_bulk, throughput, latency),
* the jobs' parameters (``PAYLOAD``, chosen with BENCH_PAYLOAD): the same for every peer.

Throughput method (the same for every peer): all jobs are enqueued first with
no worker running, then the worker CLI is started.  The clock runs from the
(N/100)-th job completion to the N-th, both timestamped inside the task, so
interpreter start-up, imports and the start skew between two worker processes
are excluded and only steady-state processing is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import functools
import importlib
import json
import logging
import os
import random
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import redis

PEERS_DIR = Path(__file__).resolve().parent
DEFAULT_LOG_DIR = PEERS_DIR.parent.parent / "var" / "bench" / "logs"

# Harness keys live outside every peer's namespace (bench/peers/sidekiq_bench.rb and bullmq_bench.js use the same).
COUNTER_KEY = "bench:counter"
MARK_PREFIX = "bench:mark:"  # + the completion count; its value the time the task stamped
LATENCY_KEY = "bench:latency"
MARK_POLL_S = 0.005  # how often the harness looks for the marks (a stamp is taken in the task, not here)

# Environment passed to worker processes (they import the adapter module).
ENV_URL = "BENCH_REDIS_URL"
ENV_MARK_AT = "BENCH_MARK_AT"
# A task that waits this long before its INCR (an I/O-bound task; 0 = the no-op). It shows how a system scales
# when the cores are not what limits it; the workers inherit it with the rest of the environment.
ENV_TASK_SLEEP_MS = "BENCH_TASK_SLEEP_MS"
TASK_SLEEP_S = float(os.environ.get(ENV_TASK_SLEEP_MS) or 0) / 1000

# The parameters every job carries, passed as keyword arguments with every peer's normal API (the latency probe
# adds t_enq). The same dicts for every system; BENCH_PAYLOAD picks one (run_peers.py --payload).
ENV_PAYLOAD = "BENCH_PAYLOAD"
PAYLOADS: dict[str, dict[str, Any]] = {
    # What issue 31 measured with: one dict of about 130 bytes of JSON. Over 64 bytes a value leaves Redis's
    # compact (listpack) hash encoding, so a system storing the parameters in a hash pays what users pay.
    "130b": {"i": 48213, "pad": "abcdefghij" * 10, "n": 20000},
    "none": {},
    "small": {"user_id": 48213, "email": "ada@example.com", "plan": "pro"},
    # About 1 KB of JSON: an order as a shop's task would get it. No key is an option name of any peer's
    # enqueue call (id, key, priority, timeout, meta, ...), so each passes them all through to the task.
    "1kb": {
        "order_id": 90517342,
        "customer_email": "ada@example.com",
        "currency": "EUR",
        "total_cents": 18450,
        "placed_at": "2026-11-27T09:14:05Z",
        "shipping_address": {
            "name": "Ada Lovelace",
            "street": "12 St James's Square",
            "city": "London",
            "postcode": "SW1Y 4JH",
            "country": "GB",
        },
        "items": [
            {"sku": "BK-1843-NOTES", "title": "Sketch of the Analytical Engine, notes", "qty": 1, "unit_cents": 4200},
            {"sku": "PN-0007-BRASS", "title": "Brass fountain pen, medium nib", "qty": 2, "unit_cents": 3150},
            {"sku": "NB-0210-GRID", "title": "Grid notebook, A5, 192 pages", "qty": 3, "unit_cents": 1250},
            {"sku": "IN-0031-BLUE", "title": "Bottled ink, blue-black, 50 ml", "qty": 1, "unit_cents": 1450},
            {"sku": "CD-0100-PUNCH", "title": "Punched cards, pack of 100", "qty": 1, "unit_cents": 1500},
        ],
        "note": (
            "Leave the parcel with the porter if nobody answers. The notebooks are a gift: please leave out the "
            "invoice and add the gift card with the message below. Happy birthday, and may your engine never "
            "stall on a carry. Call before delivery."
        ),
    },
}
PAYLOAD_NAME = os.environ.get(ENV_PAYLOAD) or "130b"
if PAYLOAD_NAME not in PAYLOADS:
    raise SystemExit(f"{ENV_PAYLOAD}={PAYLOAD_NAME!r}: not one of {', '.join(PAYLOADS)}")
PAYLOAD: dict[str, Any] = PAYLOADS[PAYLOAD_NAME]

MODES = ("enqueue_single", "enqueue_bulk", "throughput", "latency")
BULK_BATCH = 1000  # jobs per bulk call: realistic size, bounded memory
LATENCY_GAP_S = (0.02, 0.06)  # idle time before each latency sample
STALL_TIMEOUT_S = 60.0  # no progress for this long means the run failed
STOP_GRACE_S = 5.0

THROUGHPUT_METHOD = (
    "jobs pre-enqueued with no worker running, then the worker CLI is started; "
    "rate = (N - N/100) / (t[N] - t[N/100]) with t[k] stamped in the task at the "
    "k-th completion (excludes start-up and 2-worker start skew)"
)
LATENCY_METHOD = (
    "one idle worker; each sample waits a random 20-60 ms, stamps time.time() "
    "right before the peer's enqueue call and the task stamps its start; "
    "latency = task start - enqueue call"
)


# --------------------------------------------------------------------------
# Task side: runs inside the peer's worker processes.
# --------------------------------------------------------------------------


def redis_url() -> str:
    """URL of the benchmark Redis, set by the adapter before anything imports it."""
    return os.environ[ENV_URL]


_CLIENTS: dict[int, redis.Redis] = {}


def task_client() -> redis.Redis:
    """One bookkeeping client per process (workers may fork after import)."""
    pid = os.getpid()
    client = _CLIENTS.get(pid)
    if client is None:
        client = _CLIENTS[pid] = redis.Redis.from_url(redis_url())
    return client


@functools.cache
def _marks() -> frozenset[int]:
    """Completion counts at which the task pushes a timestamp (set by the harness)."""
    raw = os.environ.get(ENV_MARK_AT, "")
    return frozenset(int(v) for v in raw.split(",") if v)


def record_job(client: redis.Redis, t_enq: float | None) -> None:
    """The benchmark task body: a no-op plus one INCR of bookkeeping.

    Latency probes (t_enq given) push their pick-up delay instead; the
    throughput run's two marked completions also SET a timestamp.
    """
    started = time.time()
    if t_enq is not None:
        client.rpush(LATENCY_KEY, repr(started - t_enq))
        return
    if TASK_SLEEP_S:
        time.sleep(TASK_SLEEP_S)
    done = client.incr(COUNTER_KEY)
    if done in _marks():
        client.set(f"{MARK_PREFIX}{done}", repr(time.time()))


async def record_job_async(client: Any, t_enq: float | None) -> None:
    """Same as :func:`record_job` for asyncio peers (redis.asyncio client)."""
    started = time.time()
    if t_enq is not None:
        await client.rpush(LATENCY_KEY, repr(started - t_enq))
        return
    if TASK_SLEEP_S:
        await asyncio.sleep(TASK_SLEEP_S)
    done = await client.incr(COUNTER_KEY)
    if done in _marks():
        await client.set(f"{MARK_PREFIX}{done}", repr(time.time()))


# --------------------------------------------------------------------------
# Adapter side: what each peer module provides.
# --------------------------------------------------------------------------


# Enqueue n jobs; None, or (elapsed s, producer CPU s) when a producer process of the peer's language timed itself.
Enqueue = Callable[[int], tuple[float, float] | None]


@dataclass(frozen=True)
class Peer:
    """What an adapter tells the harness about its peer."""

    name: str
    version: str
    enqueue_single: Enqueue  # enqueue n jobs, one API call each
    enqueue_probe: Callable[[], float | None]  # enqueue one latency job, stamped just before the call
    worker_commands: Callable[[int], list[list[str]]]  # argv per OS process for N workers
    config: Callable[[int], dict[str, Any]]  # settings reported in the JSON "config"
    enqueue_bulk: Enqueue | None = None  # None: the peer has no bulk API
    bulk_api: str = ""  # which call enqueue_bulk uses, and whether it batches round trips
    # Processes that run for the whole measurement beside the workers (Jobconsole's database mirror): started
    # before anything is enqueued, their process groups' CPU counted with the workers'. `prepare` runs first
    # (a fresh database), `services_ready` says when they are up; `settle(n)` runs once the workers have
    # finished n jobs, waits for the services to catch up and returns figures to add to the result.
    services: Callable[[], list[list[str]]] | None = None
    prepare: Callable[[], None] | None = None
    services_ready: Callable[[], bool] | None = None
    settle: Callable[[int], dict[str, Any]] | None = None


def venv_bin(name: str) -> str:
    """A console script installed next to the running (venv) interpreter."""
    return str(Path(sys.executable).with_name(name))


def in_batches(n: int, size: int = BULK_BATCH) -> list[int]:
    """Split n jobs into bulk-call sizes."""
    return [min(size, n - start) for start in range(0, n, size)]


class AsyncRunner:
    """A private event loop so sync harness code can drive asyncio peers.

    Whole enqueue loops run inside one ``run_until_complete`` so per-call
    loop overhead is not charged to the peer.
    """

    def __init__(self) -> None:
        import asyncio  # only the asyncio peers pay for this import

        self.loop = asyncio.new_event_loop()

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)


class ForeignProducer:
    """The producer of a peer in another language (Ruby's Sidekiq::Client, Node's BullMQ Queue): one process,
    started before the measurement, driven line by line over its stdin. `enqueue N` (N calls, one job each),
    `bulk N` and `probe` (stamp the time, enqueue one latency job) are each answered with one JSON line; the
    producer times its own calls and CPU, so the pipe is not charged to the peer. It gets the Redis URL and the
    jobs' parameters (BENCH_PAYLOAD_JSON) in its environment, and exits when its stdin closes."""

    def __init__(self, argv: list[str], log_name: str, env: dict[str, str] | None = None) -> None:
        self.argv, self.log_name, self.env = argv, log_name, env or {}
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = DEFAULT_LOG_DIR / f"{log_name}-producer.log"

    def start(self) -> None:
        if self.proc is not None:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env, ENV_URL: redis_url(), "BENCH_PAYLOAD_JSON": json.dumps(PAYLOAD)}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                self.argv, cwd=PEERS_DIR, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True
            )
        atexit.register(self.stop)
        self._reply()  # {"ready": true} once connected

    def stop(self) -> None:
        """Close its stdin (it exits on that), killing it if it has not within a few seconds."""
        if self.proc is None:
            return
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def _reply(self) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            tail = self.log_path.read_text(errors="replace")[-1500:]
            raise RuntimeError(f"producer {shlex.join(self.argv)} exited; log tail:\n{tail}")
        return cast(dict[str, Any], json.loads(line))

    def ask(self, command: str) -> dict[str, Any]:
        self.start()
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._reply()

    def enqueue(self, n: int) -> tuple[float, float]:
        r = self.ask(f"enqueue {n}")
        return float(r["elapsed_s"]), float(r["cpu_s"])

    def bulk(self, n: int) -> tuple[float, float]:
        r = self.ask(f"bulk {n}")
        return float(r["elapsed_s"]), float(r["cpu_s"])

    def probe(self) -> float:
        return float(self.ask("probe")["call_s"])

    def peer(self, name: str, version: str, bulk_api: str, **rest: Any) -> Peer:
        """The Peer whose enqueues are this producer's, started before each measurement."""
        return Peer(
            name=name,
            version=version,
            enqueue_single=self.enqueue,
            enqueue_probe=self.probe,
            enqueue_bulk=self.bulk,
            bulk_api=bulk_api,
            prepare=self.start,
            **rest,
        )


# --------------------------------------------------------------------------
# Redis accounting for the harness's own connection.
# --------------------------------------------------------------------------


class CountingRedis(redis.Redis):
    """Counts the commands this client sends so they can be subtracted."""

    calls = 0  # per instance once incremented; avoids overriding Redis.__init__

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.calls += 1
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


def blpop(client: CountingRedis, key: str, timeout: int) -> list[str] | None:
    """BLPOP one key; the casts paper over redis-py's sync/async shared stubs."""
    return cast("list[str] | None", client.blpop([key], timeout=timeout))


def total_calls(client: CountingRedis) -> int:
    stats = cast(dict[str, dict[str, Any]], client.info("commandstats"))
    return sum(int(v["calls"]) for v in stats.values())


class CmdWindow:
    """Redis commands issued by others between start() and stop().

    Redis counts an INFO after it replies, so the opening INFO shows up in the
    closing snapshot; it and every other harness call in between are removed.
    Commands run inside Lua scripts are counted, as Redis counts them.
    """

    def __init__(self, client: CountingRedis) -> None:
        self.client = client
        self.before = 0
        self.own_before = 0

    def start(self) -> None:
        self.before = total_calls(self.client)
        self.own_before = self.client.calls

    def stop(self) -> int:
        own = self.client.calls - self.own_before + 1
        return total_calls(self.client) - self.before - own


class CpuMeter:
    """CPU used by Redis (INFO cpu) and by our reaped child processes.

    RUSAGE_CHILDREN covers the worker CLIs and every descendant they waited
    for (pool processes, rq work horses); it includes their start-up.
    """

    def __init__(self, client: CountingRedis) -> None:
        self.client = client
        self.redis0 = 0.0
        self.children0 = 0.0

    def _redis_cpu(self) -> float:
        info = self.client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    @staticmethod
    def _children_cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    def start(self) -> None:
        self.redis0 = self._redis_cpu()
        self.children0 = self._children_cpu()

    def redis_s(self) -> float:
        return self._redis_cpu() - self.redis0

    def children_s(self) -> float:
        return self._children_cpu() - self.children0

    def snapshot(self, procs: list[subprocess.Popen[bytes]]) -> tuple[float, float]:
        """(Redis CPU s, worker CPU s) so far: two snapshots bracket a steady-state window."""
        return self._redis_cpu(), process_groups_cpu({p.pid for p in procs})


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_groups_cpu(pgids: set[int]) -> float:
    """CPU seconds of every live process in these process groups, plus the children they reaped (Linux /proc).

    A worker CLI's group holds its pool processes too, and a reaped rq work horse counts in its parent's
    cutime/cstime, so this is the whole CPU the workers have used, read while they run.
    """
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:  # the process has just exited
            continue
        # After the command name: state(0) ppid(1) pgrp(2) ... utime(11) stime(12) cutime(13) cstime(14).
        if int(fields[2]) in pgids:
            total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
    return total / CLOCK_TICKS


# --------------------------------------------------------------------------
# Worker processes.
# --------------------------------------------------------------------------


def worker_env(mark_at: Sequence[int]) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PEERS_DIR), env.get("PYTHONPATH")]))
    env[ENV_MARK_AT] = ",".join(str(m) for m in mark_at)
    return env


def start_workers(
    commands: list[list[str]], env: dict[str, str], log_stem: Path, pgid_file: Path | None
) -> list[subprocess.Popen[bytes]]:
    """Start each worker CLI in its own process group (covers its children)."""
    log_stem.parent.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []
    for i, argv in enumerate(commands):
        with open(f"{log_stem}-{i}.log", "wb") as log:
            proc = subprocess.Popen(
                argv,
                cwd=PEERS_DIR,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        procs.append(proc)
        if pgid_file is not None:  # lets run_peers.py clean up if we are killed
            with open(pgid_file, "a") as f:
                f.write(f"{proc.pid}\n")
    return procs


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every worker group, then SIGKILL whatever is left of it."""
    for proc in procs:
        _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        # Also reaps pool children that outlived their parent.
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()


def check_alive(procs: list[subprocess.Popen[bytes]], log_stem: Path) -> None:
    if procs and all(p.poll() is not None for p in procs):
        tail = Path(f"{log_stem}-0.log").read_text(errors="replace")[-1500:]
        raise RuntimeError(f"all worker processes exited; log tail:\n{tail}")


def wait_for_marks(
    client: CountingRedis,
    want: set[int],
    procs: list[subprocess.Popen[bytes]],
    log_stem: Path,
    on_mark: Callable[[int], object] | None = None,
) -> dict[int, float]:
    """Wait until every wanted completion has stamped its mark; `on_mark(k)` runs as each appears.

    The marks are polled every few ms (one MGET, the same for every peer); the counter tells a stall apart.
    """
    got: dict[int, float] = {}
    pending = sorted(want)
    last_count, last_change, last_check = -1, time.monotonic(), time.monotonic()
    while pending:
        stamps = cast("list[str | None]", client.mget([f"{MARK_PREFIX}{k}" for k in pending]))
        for k, stamp in zip(list(pending), stamps, strict=True):
            if stamp is not None:
                got[k] = float(stamp)
                pending.remove(k)
                if on_mark is not None:
                    on_mark(k)
        if not pending:
            break
        now = time.monotonic()
        if now - last_check >= 1.0:
            last_check = now
            count = int(cast("str | None", client.get(COUNTER_KEY)) or 0)
            if count != last_count:
                last_count, last_change = count, now
            elif now - last_change > STALL_TIMEOUT_S:
                raise RuntimeError(f"no progress for {STALL_TIMEOUT_S:.0f}s at {count} jobs")
            check_alive(procs, log_stem)
        time.sleep(MARK_POLL_S)
    return got


# --------------------------------------------------------------------------
# The four modes.
# --------------------------------------------------------------------------


SERVICE_START_TIMEOUT_S = 60.0


def pgids(procs: Sequence[subprocess.Popen[bytes]]) -> set[int]:
    return {p.pid for p in procs}  # each was started as its own session and process group leader


@dataclass
class Run:
    peer: Peer
    client: CountingRedis
    args: argparse.Namespace
    services: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def log_stem(self) -> Path:
        a = self.args
        return Path(a.log_dir) / f"{self.peer.name}-{a.mode}-w{a.workers}"

    @contextmanager
    def running_services(self) -> Iterator[None]:
        """The peer's services (if any) around one whole measurement, started before its first enqueue."""
        peer = self.peer
        if peer.prepare is not None:
            peer.prepare()
        if peer.services is None:
            yield
            return
        stem = self.log_stem.with_name(f"{self.log_stem.name}-service")
        try:
            self.services = start_workers(peer.services(), worker_env([]), stem, self.args.pgid_file)
            deadline = time.monotonic() + SERVICE_START_TIMEOUT_S
            while peer.services_ready is not None and not peer.services_ready():
                check_alive(self.services, stem)
                if time.monotonic() > deadline:
                    raise RuntimeError(f"services not ready after {SERVICE_START_TIMEOUT_S:.0f}s; see {stem}-0.log")
                time.sleep(0.05)
            yield
        finally:
            stop_workers(self.services)

    def settle(self, jobs: int, cpu0: float) -> dict[str, Any]:
        """Wait for the services to catch up with `jobs` finished jobs; their figures, and their CPU per job
        since `cpu0` (what process_groups_cpu read before the enqueue)."""
        if self.peer.settle is None:
            return {}
        result = self.peer.settle(jobs)
        if self.services:
            result["service_cpu_ms_per_job"] = round((process_groups_cpu(pgids(self.services)) - cpu0) * 1000 / jobs, 3)
        return result

    def timed_enqueue(self, enqueue: Enqueue, jobs: int) -> dict[str, Any]:
        window, cpu = CmdWindow(self.client), CpuMeter(self.client)
        window.start()
        cpu.start()
        t0, cpu0 = time.perf_counter(), time.process_time()
        reported = enqueue(jobs)
        elapsed, producer_cpu = time.perf_counter() - t0, time.process_time() - cpu0
        redis_cpu = cpu.redis_s()
        cmds = window.stop()
        if reported is not None:  # a producer process of the peer's own language timed itself
            elapsed, producer_cpu = reported
        return {
            "jobs_per_s": round(jobs / elapsed, 1),
            "elapsed_s": round(elapsed, 3),
            "enqueue_cmds_per_job": round(cmds / jobs, 2),
            # Redis's CPU (INFO cpu) over the enqueue loop per job: with a service running (the mirror), its
            # reads of what the enqueue wrote count too.
            "redis_cpu_us_per_enqueue": round(redis_cpu * 1e6 / jobs, 1),
            # The producer's own CPU per call (user + system): what a web request pays to enqueue a job.
            "producer_cpu_us_per_enqueue": round(producer_cpu * 1e6 / jobs, 1),
        }

    def enqueue_single(self) -> dict[str, Any]:
        with self.running_services():
            return self.timed_enqueue(self.peer.enqueue_single, self.args.jobs)

    def enqueue_bulk(self) -> dict[str, Any]:
        if self.peer.enqueue_bulk is None:
            return {"jobs_per_s": None, "note": self.peer.bulk_api}
        with self.running_services():
            result = self.timed_enqueue(self.peer.enqueue_bulk, self.args.jobs)
        return {**result, "bulk_api": self.peer.bulk_api, "batch": BULK_BATCH}

    def throughput(self) -> dict[str, Any]:
        with self.running_services():
            return self._throughput()

    def _throughput(self) -> dict[str, Any]:
        jobs, workers = self.args.jobs, self.args.workers
        warm = max(1, jobs // 100)
        service_cpu0 = process_groups_cpu(pgids(self.services))
        enq = self.timed_enqueue(self.peer.enqueue_single, jobs)
        window, cpu = CmdWindow(self.client), CpuMeter(self.client)
        procs: list[subprocess.Popen[bytes]] = []
        try:
            window.start()
            cpu.start()
            t_spawn = time.time()
            procs = start_workers(
                self.peer.worker_commands(workers),
                worker_env([warm, jobs]),
                self.log_stem,
                self.args.pgid_file,
            )
            # CPU snapshots as the warm and the last mark arrive: the steady-state window's CPU, the services'
            # (the mirror's) included.
            at_mark: dict[int, tuple[float, float]] = {}
            marks = wait_for_marks(
                self.client,
                {warm, jobs},
                procs,
                self.log_stem,
                lambda k: at_mark.setdefault(k, cpu.snapshot(procs + self.services)),
            )
            redis_cpu = cpu.redis_s()
            worker_cmds = window.stop()
            settled = self.settle(jobs, service_cpu0)  # the workers still run, as they would
            # The drain phase's Redis CPU: from the workers' start until the last job, and until the mirror (if
            # any) has read every job, so that its reads count as the "Redis work per job" does.
            drain_redis_cpu = cpu.redis_s()
        finally:
            stop_workers(procs)
        worker_cpu = cpu.children_s()
        harness_cmds = jobs + 2  # the task's INCR per job and the two mark RPUSHes
        peer_worker_cmds = (worker_cmds - harness_cmds) / jobs
        span = marks[jobs] - marks[warm]
        window_redis_s = at_mark[jobs][0] - at_mark[warm][0]
        window_worker_s = at_mark[jobs][1] - at_mark[warm][1]
        return {
            "jobs_per_s": round((jobs - warm) / span, 1) if span > 0 else None,
            "measured_jobs": jobs - warm,
            "measured_s": round(span, 3),
            "spawn_to_done_s": round(marks[jobs] - t_spawn, 3),
            "redis_cmds_per_job": round(enq["enqueue_cmds_per_job"] + peer_worker_cmds, 2),
            "enqueue_cmds_per_job": enq["enqueue_cmds_per_job"],
            "worker_cmds_per_job": round(peer_worker_cmds, 2),
            "enqueue_jobs_per_s": enq["jobs_per_s"],
            "enqueue_redis_cpu_us_per_job": enq["redis_cpu_us_per_enqueue"],
            "enqueue_producer_cpu_us_per_job": enq["producer_cpu_us_per_enqueue"],
            # CPU per job while processing; worker CPU includes its start-up (the worker CLIs only).
            "worker_cpu_ms_per_job": round(worker_cpu * 1000 / jobs, 3),
            "redis_cpu_us_per_job": round(redis_cpu * 1e6 / jobs, 1),
            "drain_redis_cpu_us_per_job": round(drain_redis_cpu * 1e6 / jobs, 1),
            # The same window as the rate (from the N/100-th completion to the N-th), without start-up: the
            # cores the run kept busy (workers, services + Redis) and its CPU per job. Snapshots are taken as
            # the marks arrive, a little after they were stamped, which the long window makes negligible.
            "steady_worker_cpu_ms_per_job": round(window_worker_s * 1000 / (jobs - warm), 3),
            "steady_redis_cpu_us_per_job": round(window_redis_s * 1e6 / (jobs - warm), 1),
            "busy_cores": round((window_worker_s + window_redis_s) / span, 2) if span > 0 else None,
            **settled,
            "method": THROUGHPUT_METHOD,
        }

    def latency(self) -> dict[str, Any]:
        with self.running_services():
            return self._latency()

    def _latency(self) -> dict[str, Any]:
        samples = self.args.samples
        procs: list[subprocess.Popen[bytes]] = []
        try:
            procs = start_workers(
                self.peer.worker_commands(self.args.workers),
                worker_env([1]),
                self.log_stem,
                self.args.pgid_file,
            )
            # A warm-up job proves the worker is up and consuming.
            self.peer.enqueue_single(1)
            wait_for_marks(self.client, {1}, procs, self.log_stem)
            time.sleep(0.5)
            service_cpu0 = process_groups_cpu(pgids(self.services))
            cpu = CpuMeter(self.client)
            cpu.start()
            delays, calls = self._latency_samples(samples, procs)
            redis_cpu_s = cpu.redis_s()
            settled = self.settle(samples + 1, service_cpu0)  # the warm-up job and the samples
        finally:
            stop_workers(procs)
        q = statistics.quantiles(delays, n=100, method="inclusive")
        return {
            "samples": samples,
            "p50_ms": round(q[49], 3),
            "p95_ms": round(q[94], 3),
            "p99_ms": round(q[98], 3),
            "max_ms": round(max(delays), 3),
            # Where the pick-up goes: the producer's enqueue call (its own work plus the round trip, during
            # which Redis runs whatever the enqueue is), and the task's start against the call's return
            # (negative when the worker started it before the producer's call returned).
            "enqueue_call_p50_ms": round(statistics.median(calls), 3),
            "after_call_p50_ms": round(statistics.median(d - c for d, c in zip(delays, calls, strict=True)), 3),
            # Redis CPU per sample while idle gaps dominate: the enqueue, the worker's pick-up and ack, and the
            # harness's own BLPOP and RPUSH of the sample (the same for every peer).
            "redis_cpu_us_per_pickup": round(redis_cpu_s * 1e6 / samples, 1),
            # Every sample, so that run_peers.py can pool the rounds of an alternated run.
            "delays_ms": [round(d, 3) for d in delays],
            "calls_ms": [round(c, 3) for c in calls],
            **settled,
            "method": LATENCY_METHOD,
        }

    def _latency_samples(self, samples: int, procs: list[subprocess.Popen[bytes]]) -> tuple[list[float], list[float]]:
        """Pick-up delays and the enqueue calls' own durations (ms), sample by sample."""
        rng = random.Random(3)  # same idle gaps for every peer
        delays: list[float] = []
        calls: list[float] = []
        for i in range(samples):
            time.sleep(rng.uniform(*LATENCY_GAP_S))
            called = time.perf_counter()
            reported = self.peer.enqueue_probe()
            calls.append((time.perf_counter() - called if reported is None else reported) * 1000.0)
            item = blpop(self.client, LATENCY_KEY, 30)
            if item is None:
                check_alive(procs, self.log_stem)
                raise RuntimeError(f"latency sample {i} not picked up within 30s")
            delays.append(float(item[1]) * 1000.0)
        return delays, calls


# --------------------------------------------------------------------------
# Entry point.
# --------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Benchmark one job-queue peer (one JSON line on stdout).")
    p.add_argument("--redis-url", required=True, help="a private Redis: it is FLUSHALLed")
    p.add_argument("--jobs", type=int, default=20000)
    p.add_argument("--workers", type=int, choices=range(1, 9), default=1, help="worker processes")
    p.add_argument("--mode", choices=MODES, required=True)
    p.add_argument("--samples", type=int, default=200, help="latency samples")
    p.add_argument("--log-dir", default=str(DEFAULT_LOG_DIR), help="worker logs")
    p.add_argument("--pgid-file", type=Path, help="append worker process-group ids here")
    return p.parse_args(argv)


def _raise_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so `finally` blocks stop the workers."""

    def handler(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def run_mode(peer: Peer, client: CountingRedis, args: argparse.Namespace) -> dict[str, Any]:
    run = Run(peer, client, args)
    return {
        "enqueue_single": run.enqueue_single,
        "enqueue_bulk": run.enqueue_bulk,
        "throughput": run.throughput,
        "latency": run.latency,
    }[args.mode]()


def main(module_name: str) -> int:
    """Run one measurement of the adapter module `module_name`, print one JSON line.

    The module is imported by name (not used as __main__) so task names and
    import paths match what the worker CLI imports.
    """
    args = parse_args()
    os.environ[ENV_URL] = args.redis_url
    result_out = sys.stdout
    sys.stdout = sys.stderr  # stdout carries exactly one JSON line
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    _raise_on_sigterm()
    uses_workers = args.mode in ("throughput", "latency")
    result: dict[str, Any] = {
        "peer": module_name.removesuffix("_bench"),
        "mode": args.mode,
        "workers": args.workers if uses_workers else 0,
        "jobs": args.jobs if args.mode != "latency" else 0,
    }
    if TASK_SLEEP_S:
        result["task_sleep_ms"] = TASK_SLEEP_S * 1000
    result["payload"] = PAYLOAD_NAME
    result["payload_bytes"] = len(json.dumps(PAYLOAD))
    rc = 0
    try:
        peer: Peer = importlib.import_module(module_name).PEER
        result.update(peer=peer.name, version=peer.version)
        client = CountingRedis(connection_pool=redis.ConnectionPool.from_url(args.redis_url, decode_responses=True))
        client.flushall()  # every run starts from an empty Redis
        result.update(run_mode(peer, client, args))
        result["config"] = peer.config(args.workers)
        result["ok"] = True
    except Exception as exc:  # noqa: BLE001 - any failure becomes a JSON error line
        traceback.print_exc()
        result.update(ok=False, error=f"{type(exc).__name__}: {exc}")
        rc = 1
    print(json.dumps(result), file=result_out, flush=True)
    return rc
