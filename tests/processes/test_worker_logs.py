"""runworker in a project with no LOGGING setting: it says what it serves and every failure in one line each, on
stderr, with no configuration; JOBCONSOLE_LOG_LEVEL quiets it; a project's own logging is left alone."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import redis

from jobconsole.core import Client
from jobconsole.logs import without_password
from tests.conftest import PROJECT

SETTINGS = """\
SECRET_KEY = "logs-test-only"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "jobconsole"]
DATABASES = {{"default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": {db!r}}}}}
USE_TZ = True
JOBCONSOLE = {{"REDIS_URL": {url!r}, "TASK_MODULES": ["quiettasks"]}}
{extra}
"""

TASKS = """\
from jobconsole.core import task


@task(name="quiet.boom", max_retries=1, retry_delay=0)
def boom() -> None:
    raise ValueError("the disk is full\\nsecond line")
"""


def runworker(tmp_path: Path, redis_url: str, extra: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "quietsite.py").write_text(
        textwrap.dedent(SETTINGS).format(db=str(tmp_path / "db.sqlite3"), url=redis_url, extra=extra)
    )
    (tmp_path / "quiettasks.py").write_text(TASKS)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "JOBCONSOLE", "REDIS_URL"))}
    environ |= {"PYTHONPATH": f"{tmp_path}{os.pathsep}{PROJECT}", "DJANGO_SETTINGS_MODULE": "quietsite", **env}
    return subprocess.run(
        [sys.executable, "-m", "django", "runworker", "--burst", "--no-mirror", "--no-system-worker",
         "--concurrency", "3"],
        cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.timeout(120)
def test_a_project_without_logging_sees_the_start_and_every_failure(
    tmp_path: Path, redis_url: str, r: "redis.Redis"
) -> None:
    producer = Client(r, strict=False)  # quiet.boom is the subprocess's task, not registered here
    job_id = producer.enqueue("quiet.boom", {}, queue="quiet.boom", max_retries=1).id
    result = runworker(tmp_path, redis_url)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    [start] = [line for line in lines if "runworker started" in line]
    assert "pid=" in start and "queues=quiet.boom" in start and "concurrency=3" in start
    assert f"redis={redis_url}" in start and " burst" in start
    failed = [line for line in lines if "job failed" in line]
    assert len(failed) == 2, result.stderr
    assert f"job={job_id}" in failed[0] and "task=quiet.boom" in failed[0] and "(will retry)" in failed[0]
    assert " INFO " in failed[0] and "error=ValueError: the disk is full second line" in failed[0]
    assert "attempt=2 state=dead (dead-lettered)" in failed[1] and " ERROR " in failed[1]

    # The level is one setting: WARNING keeps the dead letter and drops the start and the retry.
    producer.enqueue("quiet.boom", {}, queue="quiet.boom", max_retries=1)
    quiet = runworker(tmp_path, redis_url, JOBCONSOLE_LOG_LEVEL="WARNING").stderr
    assert "runworker started" not in quiet and "(will retry)" not in quiet and "(dead-lettered)" in quiet


@pytest.mark.timeout(120)
def test_a_project_logging_config_is_left_alone(tmp_path: Path, redis_url: str, r: "redis.Redis") -> None:
    own = 'LOGGING = {"version": 1, "root": {"handlers": [], "level": "CRITICAL"}, "loggers": {"jobconsole": {"handlers": ["null"]}}, "handlers": {"null": {"class": "logging.NullHandler"}}}'  # noqa: E501
    result = runworker(tmp_path, redis_url, extra=own)
    assert result.returncode == 0, result.stderr
    assert "runworker started" not in result.stderr


def test_redis_urls_lose_their_passwords_in_logs() -> None:
    assert without_password("redis://:s3cret@h:6379/0") == "redis://:***@h:6379/0"
    assert without_password("rediss://app:s3cret@h:6380/1") == "rediss://app:***@h:6380/1"
    assert without_password("redis://h:6379/0") == "redis://h:6379/0"
    sentinel = "redis+sentinel://:pw@a:26379,b:26379/mymaster?sentinel_password=sp&x=1"
    assert without_password(sentinel) == "redis+sentinel://:***@a:26379,b:26379/mymaster?sentinel_password=***&x=1"
