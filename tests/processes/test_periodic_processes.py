"""Three real `manage.py runscheduler` processes over a database schedule firing every second: each slot's job
is enqueued once, none is left out, and killing the leader mid-way hands the work over without a double fire."""

import os
import signal
import subprocess
from pathlib import Path

import pytest

from jobconsole.core import Client, JobState
from jobconsole.core.connection import connect
from jobconsole.core.errors import JobNotFound
from jobconsole.core.ids import slot_job_id
from tests.conftest import PROJECT, PYTHON, manage_env
from tests.live import wait_until

pytestmark = pytest.mark.slow

CREATE = (
    "from jobconsole.models import PeriodicSchedule; "
    "PeriodicSchedule.objects.create("
    "name='tick', task='examples.echo', every_seconds=1, queue='ticks', params={'n': 1})"
)


def manage(env: dict[str, str], *args: str) -> None:
    subprocess.run([PYTHON, str(PROJECT / "manage.py"), *args], cwd=PROJECT, env=env, check=True, timeout=120,
                   capture_output=True)  # fmt: skip


def connected_to(pid: int, port: int) -> bool:
    """Whether process `pid` holds a TCP connection to 127.0.0.1:`port` (its socket inodes in /proc/net/tcp)."""
    try:
        links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
    except OSError:
        return False
    sockets = {link[len("socket:[") : -1] for link in links if link.startswith("socket:[")}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[2].split(":")[1], 16) == port and fields[3] == "01" and fields[9] in sockets:  # 01: ESTABLISHED
            return True
    return False


def test_three_scheduler_processes_fire_each_slot_once(redis_url: str, tmp_path: Path) -> None:
    (tmp_path / "var").mkdir()
    env = manage_env(redis_url, tmp_path)
    connect(redis_url).flushall()
    manage(env, "migrate", "--verbosity", "0")
    manage(env, "shell", "-c", CREATE)
    logs = [tmp_path / f"scheduler{n}.log" for n in range(3)]
    client = Client(connect(redis_url), strict=False)
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])

    def start(log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as out:
            return subprocess.Popen(
                [PYTHON, str(PROJECT / "manage.py"), "runscheduler"], cwd=PROJECT, env=env, stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    def output() -> str:
        return "".join(log.read_text(errors="replace")[-2000:] for log in logs)

    def ticks() -> int:
        return len(client.job_ids("ticks", JobState.QUEUED, 1000))

    # Waits on events, not on the clock (a loaded machine may take seconds to start a Django process): the first
    # scheduler alone is surely the leader once ticks come; the other two join and poll the lock; then the leader
    # is killed and the ticks must go on from one of them (after the lock's TTL), none left out nor doubled.
    schedulers = [start(logs[0])]
    try:
        wait_until(lambda: ticks() >= 3, 120, "the first scheduler's ticks", output)
        schedulers += [start(log) for log in logs[1:]]
        for proc in schedulers[1:]:
            wait_until(lambda proc=proc: connected_to(proc.pid, port), 120, "a follower connecting to Redis", output)
        schedulers[0].kill()
        schedulers[0].wait()
        at_kill = ticks()
        wait_until(lambda: ticks() >= at_kill + 4, 60, "ticks after the leader was killed", output)
    finally:
        for proc in schedulers:
            proc.send_signal(signal.SIGTERM)
        for proc in schedulers:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
    queued = client.job_ids("ticks", JobState.QUEUED, 1000)
    assert len(queued) >= 7, output()
    slots = sorted(client.get(job_id).unique_key for job_id in queued)
    assert len(set(slots)) == len(slots), output()  # one job per slot
    slot_ms = sorted(int(key.rsplit(":", 1)[1]) for key in slots)
    assert slot_ms == list(range(slot_ms[0], slot_ms[-1] + 1000, 1000)), output()  # none left out, even at the handover
    for ms in slot_ms:
        assert client.get(slot_job_id("tick", ms)).params == {"n": 1}
    with pytest.raises(JobNotFound):  # nothing fired before the schedulers started (no backlog)
        client.get(slot_job_id("tick", slot_ms[0] - 1000))
