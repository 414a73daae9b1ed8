"""The processes under test: one redis-server, `manage.py runworker` and `runrecoverer` subprocesses.

Every signal the harness sends to a worker is written to the ledger as a fault, so the checker can tell a
lease lost to an injected fault from a spurious one.
"""

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from chaos.ledger import ENV, SKEW_ENV, Ledger
from chaos.tasks import QUEUE
from tests.redis_server import RedisServer

PROJECT = Path(__file__).resolve().parent.parent


@dataclass
class Proc:
    name: str
    popen: "subprocess.Popen[bytes]"
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class Cluster:
    """Workers (by slot: slot i is restarted as w<i>-<generation>) and recoverers on one Redis."""

    workdir: Path
    ledger: Ledger
    redis: RedisServer
    concurrency: int = 8
    procs: list[Proc] = field(default_factory=list)
    workers: dict[int, Proc] = field(default_factory=dict)
    signalled: set[int] = field(default_factory=set)  # pids the harness sent a fatal signal to
    skews: dict[int, float] = field(default_factory=dict)  # slot -> its clock's offset in seconds (libfaketime)
    urls: dict[int, str] = field(default_factory=dict)  # slot -> the Redis URL its workers use (e.g. a proxy)
    mirrored: bool = False  # the scenario runs the database mirror (migrate() was called)
    queues: tuple[str, ...] = (QUEUE,)  # what the workers serve and the checker reads
    _generation: int = 0

    def env(self, redis_url: str) -> dict[str, str]:
        return {
            **os.environ,
            "REDIS_URL": redis_url,
            "JOBCONSOLE_TASK_MODULES": "jobconsole.examples,chaos.tasks",
            "JOBCONSOLE_VAR_DIR": str(self.workdir / "var"),
            "JOBCONSOLE_MIRROR_IN_WORKER": "0",  # a scenario that wants the mirror runs it alone (start_mirror)
            "JOBCONSOLE_MIRROR_LOCK_TTL": "1",
            "DATABASE_URL": f"sqlite:///{self.mirror_db}",  # what the checker reads, whatever the caller's is
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "SECRET_KEY": os.environ.get("SECRET_KEY") or "chaos-only-not-a-secret",
            "PYTHONPATH": str(PROJECT),
            "PYTHONUNBUFFERED": "1",
            ENV: self.ledger.path,
        }

    def _spawn(self, name: str, redis_url: str, *args: str, skew: float = 0.0) -> Proc:
        log = self.workdir / f"{name}.log"
        command = [sys.executable, str(PROJECT / "manage.py"), *args]
        env = self.env(redis_url)
        if skew:
            # The process's wall clock reads `skew` seconds off (chaos/skew/sitecustomize.py); monotonic
            # clocks are left alone, as with a host whose NTP is broken.
            env |= {SKEW_ENV: str(skew), "PYTHONPATH": f"{PROJECT / 'chaos' / 'skew'}{os.pathsep}{env['PYTHONPATH']}"}
        with log.open("wb") as out:
            popen = subprocess.Popen(command, cwd=PROJECT, env=env, stdout=out, stderr=subprocess.STDOUT)
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def start_worker(self, slot: int, redis_url: str | None = None) -> Proc:
        """(Re)start the worker in `slot`. Recovery is left to the recoverer process, like a deployment
        where workers run with --no-maintenance; that keeps the leader lock out of the processes we kill.
        A slot keeps the Redis URL it was first given."""
        if redis_url:
            self.urls[slot] = redis_url
        self._generation += 1
        name = f"w{slot}-{self._generation}"
        proc = self._spawn(
            name, self.urls.get(slot, self.redis.url), "runworker", "--queues", ",".join(self.queues), "--name", name,
            "--concurrency", str(self.concurrency), "--no-maintenance", skew=self.skews.get(slot, 0.0),
        )  # fmt: skip
        self.workers[slot] = proc
        return proc

    def start_recoverer(self, name: str = "recoverer", interval: float = 0.2, skew: float = 0.0) -> Proc:
        return self._spawn(
            f"{name}-{len(self.procs)}", self.redis.url, "runrecoverer", "--interval", str(interval), skew=skew
        )

    def migrate(self) -> None:
        """Create the database the mirror writes to (SQLite in the scenario's work directory)."""
        self.mirrored = True
        subprocess.run(
            [sys.executable, str(PROJECT / "manage.py"), "migrate", "-v0"], cwd=PROJECT, env=self.env(self.redis.url),
            check=True,
        )  # fmt: skip

    @property
    def mirror_db(self) -> Path:
        return self.workdir / "var" / "jobconsole.sqlite3"

    def start_mirror(self) -> Proc:
        """The database mirror on its own (`runmirror`); a short leader lock, so a replacement leads soon."""
        return self._spawn(f"mirror-{len(self.procs)}", self.redis.url, "runmirror")

    def wait_started(self, procs: list[Proc], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        for proc in procs:
            while f"worker={proc.name} started" not in proc.output():
                if not proc.alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"worker {proc.name} did not start:\n{proc.output()[-3000:]}")
                time.sleep(0.05)

    def signal(self, proc: Proc, sig: signal.Signals, kind: str) -> int:
        """Send `sig` and record it as a fault on that worker's pid; returns the fault id."""
        now = time.time()
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.signalled.add(proc.pid)
        if proc.alive():
            proc.popen.send_signal(sig)
        return self.ledger.fault(kind, [proc.pid], now)

    def kill(self, proc: Proc) -> None:
        self.signal(proc, signal.SIGKILL, "kill")
        proc.popen.wait()

    def restart_dead(self) -> list[Proc]:
        """Restart every worker slot whose process exited (poison jobs, self-kills)."""
        started = []
        for slot, proc in list(self.workers.items()):
            if not proc.alive():
                if proc.pid not in self.signalled:  # it died by its own hand (poison, kill before ack)
                    self.ledger.fault("crash", [proc.pid], time.time())
                started.append(self.start_worker(slot))
        return started

    def stop_all(self) -> None:
        for proc in self.procs:  # every kill first, so one slow exit cannot spare the others
            if proc.alive():
                proc.popen.send_signal(signal.SIGCONT)
                proc.popen.kill()
        for proc in self.procs:
            proc.popen.wait(timeout=10)

    def stale_reports(self) -> int:
        """Reports Redis refused because the lease had moved on (the zombie's ack or failure)."""
        return sum(p.output().count("stale lease job=") for p in self.procs)
