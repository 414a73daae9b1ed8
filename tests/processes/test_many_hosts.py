"""A deployment spread over hosts: three `runworker` processes with distinct host ids (JOBCONSOLE_HOST_ID) and two
gunicorn web servers, sharing one database and one Redis. Every runworker also runs the maintenance loop, the
mirror and the periodic scheduler, each behind its leader lock: a job whose worker is killed is recovered once,
the mirror has one leader and records the job's attempts once, each slot of a schedule firing every second fires
once, and both web servers (one session, logged in on one of them) show every host's worker."""

import http.cookiejar
import os
import re
import signal
import sqlite3
import subprocess
import time
import urllib.parse
import urllib.request
from contextlib import closing
from pathlib import Path

import pytest

import tests.tasks  # noqa: F401  (registers tests.record here, so the client enqueues it with its 2 s lease)
from jobconsole.core import Client, JobState
from jobconsole.core.connection import connect
from tests.conftest import PROJECT, PYTHON, manage_env
from tests.live import wait_until
from tests.redis_server import free_port
from tests.tasks import read_ledger

pytestmark = pytest.mark.slow

HOSTS = ("host-a", "host-b", "host-c")
SETUP = (
    "from django.contrib.auth.models import User; from jobconsole.models import PeriodicSchedule; "
    "User.objects.create_superuser('ops', 'ops@example.com', 'ops-password'); "
    "PeriodicSchedule.objects.create(name='tick', task='examples.echo', every_seconds=1, queue='ticks', params={})"
)


def logs(paths: list[Path]) -> str:
    return "\n".join(p.read_text(errors="replace") for p in paths if p.exists())


class Browser:
    """A cookie-keeping HTTP client: a session made on one web server is good on the other (the database)."""

    def __init__(self) -> None:
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def get(self, url: str) -> tuple[int, str]:
        with self.opener.open(url, timeout=30) as response:
            return response.status, response.read().decode()

    def log_in(self, base: str) -> None:
        _, page = self.get(f"{base}/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert token, page[:2000]
        form = {"username": "ops", "password": "ops-password", "csrfmiddlewaretoken": token.group(1), "next": "/"}
        request = urllib.request.Request(f"{base}/admin/login/", data=urllib.parse.urlencode(form).encode())
        with self.opener.open(request, timeout=30) as response:
            assert "/admin/login/" not in response.geturl(), "the login failed"


@pytest.mark.timeout(180)
def test_three_worker_hosts_and_two_web_servers_share_one_database_and_redis(redis_url: str, tmp_path: Path) -> None:
    (tmp_path / "var").mkdir()
    connect(redis_url).flushall()
    env = manage_env(redis_url, tmp_path, JOBCONSOLE_MIRROR_LOCK_TTL="2", DEBUG="1")  # DEBUG: plain HTTP, no TLS
    for args in (["migrate", "--verbosity", "0"], ["shell", "-c", SETUP]):
        subprocess.run([PYTHON, "manage.py", *args], cwd=PROJECT, env=env, check=True, timeout=120, capture_output=True)
    procs: list[subprocess.Popen[bytes]] = []
    paths: list[Path] = []

    def start(name: str, args: list[str], **extra: str) -> subprocess.Popen[bytes]:
        paths.append(tmp_path / f"{name}.log")
        with paths[-1].open("wb") as out:
            procs.append(
                subprocess.Popen(args, cwd=PROJECT, env={**env, **extra}, stdout=out, stderr=subprocess.STDOUT)
            )
        return procs[-1]

    try:
        for host in HOSTS:
            start(host, [PYTHON, "manage.py", "runworker", "--queues", "hosts,ticks", "--no-system-worker"],
                  JOBCONSOLE_HOST_ID=host)  # fmt: skip
        ports = [free_port(), free_port()]
        for n, port in enumerate(ports):
            start(f"web{n}", [PYTHON, "-m", "gunicorn", "project.wsgi", "--bind", f"127.0.0.1:{port}", "--workers",
                              "1", "--threads", "2"])  # fmt: skip
        client = Client(connect(redis_url))

        def registered() -> dict[str, str]:
            return {w.host: w.id for w in client.queries.workers.all() if w.state == "running"}

        ids = wait_until(lambda: (r := registered()).keys() == set(HOSTS) and r, 60, "three hosts", lambda: logs(paths))
        # Each runworker supervises its worker process and its mirror's (management/processes.py).
        pids = {host: worker_pid(tmp_path / f"{host}.log") for host in HOSTS}
        assert all(ids[host].startswith(f"{host}:{pids[host]}:") for host in HOSTS)

        # A job whose worker dies: its lease runs out and one maintenance leader, of the two left, recovers it.
        ledger = tmp_path / "ledger"
        job_id = client.enqueue("tests.record", {"ledger": str(ledger), "seconds": 30, "retry_seconds": 0.1},
                                queue="hosts").id  # fmt: skip
        [(_, _, _, pid)] = wait_until(lambda: read_ledger(ledger), 30, "the job to start", lambda: logs(paths))
        [killed] = [host for host in HOSTS if pids[host] == int(pid)]
        os.kill(int(pid), signal.SIGKILL)
        job = wait_until(
            lambda: (j := client.get(job_id)).state is JobState.COMPLETED and j, 30, "the recovered job to complete",
            lambda: logs(paths),
        )  # fmt: skip
        assert [a.outcome for a in job.history] == ["worker_lost", "completed"]
        assert logs(paths).count(f"recovered job={job_id} ") == 1

        # Both web servers: healthy, and one session (made on the first) shows every host's worker on the second.
        browser = Browser()
        bases = [f"http://127.0.0.1:{port}" for port in ports]
        for base in bases:
            wait_until(lambda b=base: _healthy(b), 60, f"{base}/healthz", lambda: logs(paths))
        browser.log_in(bases[0])
        for base in bases:
            status, page = browser.get(f"{base}/workers/")
            assert status == 200
            for host in HOSTS:
                if host != killed:
                    assert ids[host] in page, (base, host)
        time.sleep(3)  # a few more slots of the schedule
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    text = logs(paths)

    # The periodic schedule: each slot fired by one scheduler of the three, none left out.
    fired = re.findall(r"scheduler: fired tick slot=(\d+) job=\S+ status=(\w+)", text)
    slots = [int(slot) for slot, status in fired if status == "created"]
    assert len(slots) >= 5, text[-3000:]
    assert len(slots) == len(set(slots)), "a slot fired twice"
    assert sorted(slots) == list(range(min(slots), max(slots) + 1000, 1000)), "a slot was left out"

    # The mirror: one leader at a time (a second only if the first was the killed worker), and the job's attempts
    # recorded once each.
    leaders = re.findall(r"mirror=(\S+) is the leader", text)
    assert len(leaders) == 1 or (len(leaders) == 2 and leaders[0] == ids[killed]), leaders
    with closing(sqlite3.connect(tmp_path / "var" / "jobconsole.sqlite3")) as db:
        state = db.execute("SELECT state FROM jobconsole_job WHERE id = ?", (job_id,)).fetchone()
        outcomes = db.execute(
            "SELECT outcome FROM jobconsole_attempt WHERE job_id = ? ORDER BY number", (job_id,)
        ).fetchall()
        ticks = db.execute("SELECT COUNT(*), COUNT(DISTINCT unique_key) FROM jobconsole_job WHERE queue = 'ticks'")
        tick_rows, tick_keys = ticks.fetchone()
    assert state == ("completed",) and [o for (o,) in outcomes] == ["worker_lost", "completed"]
    assert tick_rows == tick_keys >= 5


def worker_pid(log: Path) -> int:
    """The worker process's pid, from the line it logs at its start."""
    return int(re.findall(r"runworker started pid=(\d+) ", log.read_text())[0])


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=10) as response:
            return response.status == 200
    except OSError:
        return False
