"""Three real `manage.py runscheduler` processes over a database schedule firing every second: each slot's job
is enqueued once, none is left out, and killing the leader mid-way hands the work over without a double fire."""

import signal
import subprocess
import time
from pathlib import Path

import pytest

from jobconsole.core import Client, JobState
from jobconsole.core.connection import connect
from jobconsole.core.errors import JobNotFound
from jobconsole.core.ids import slot_job_id
from tests.conftest import PROJECT, PYTHON, manage_env

pytestmark = pytest.mark.slow

CREATE = (
    "from jobconsole.models import PeriodicSchedule; "
    "PeriodicSchedule.objects.create("
    "name='tick', task='examples.echo', every_seconds=1, queue='ticks', params={'n': 1})"
)


def manage(env: dict[str, str], *args: str) -> None:
    subprocess.run([PYTHON, str(PROJECT / "manage.py"), *args], cwd=PROJECT, env=env, check=True, timeout=120,
                   capture_output=True)  # fmt: skip


def test_three_scheduler_processes_fire_each_slot_once(redis_url: str, tmp_path: Path) -> None:
    (tmp_path / "var").mkdir()
    env = manage_env(redis_url, tmp_path)
    connect(redis_url).flushall()
    manage(env, "migrate", "--verbosity", "0")
    manage(env, "shell", "-c", CREATE)
    logs = [tmp_path / f"scheduler{n}.log" for n in range(3)]
    schedulers = []
    for log in logs:
        with log.open("wb") as out:
            schedulers.append(subprocess.Popen(
                [PYTHON, str(PROJECT / "manage.py"), "runscheduler"], cwd=PROJECT, env=env, stdout=out,
                stderr=subprocess.STDOUT,
            ))  # fmt: skip
    try:
        time.sleep(5)
        schedulers[0].kill()  # the first started, most likely the leader: the others take over after its TTL
        time.sleep(6)
    finally:
        for proc in schedulers:
            proc.send_signal(signal.SIGTERM)
        for proc in schedulers:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
    client = Client(connect(redis_url), strict=False)
    queued = client.job_ids("ticks", JobState.QUEUED, 1000)
    output = "".join(log.read_text(errors="replace")[-2000:] for log in logs)
    assert len(queued) >= 7, output
    slots = sorted(client.get(job_id).unique_key for job_id in queued)
    assert len(set(slots)) == len(slots), output  # one job per slot
    slot_ms = sorted(int(key.rsplit(":", 1)[1]) for key in slots)
    assert slot_ms == list(range(slot_ms[0], slot_ms[-1] + 1000, 1000)), output  # none left out, even at the handover
    for ms in slot_ms:
        assert client.get(slot_job_id("tick", ms)).params == {"n": 1}
    with pytest.raises(JobNotFound):  # nothing fired before the schedulers started (no backlog)
        client.get(slot_job_id("tick", slot_ms[0] - 1000))
