"""Celery's standard Django project (tests/celery_project: proj/celery.py as Celery documents it but for the
import) on Jobconsole, with a real `manage.py runworker` and a producer, each a subprocess with proj.settings:
the app module imports, reads the CELERY_* settings (default queue, routes; the ones it cannot honour logged once
each), autodiscovers the shop app's tasks, and `@app.task(bind=True)` runs with its request."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROJECT
from tests.processes.test_worker_processes import PYTHON, Processes, wait_exit, wait_for

pytestmark = pytest.mark.slow

CELERY_PROJECT = PROJECT / "tests" / "celery_project"
ENV = {"DJANGO_SETTINGS_MODULE": "proj.settings"}


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    processes = Processes(tmp_path)
    try:
        yield processes
    finally:
        processes.kill_all()


def run_worker(procs: Processes, redis_url: str) -> Any:
    proc = procs.run(redis_url, "w1", [PYTHON, str(CELERY_PROJECT / "manage.py"), "runworker", "--name", "w1",
                                       "--concurrency", "2", "--no-system-worker"], **ENV)  # fmt: skip
    wait_for(lambda: "worker=w1 started" in proc.output(), 30, "the project's worker to start", proc)
    return proc


def produce(procs: Processes, redis_url: str, *flags: str) -> dict[str, Any]:
    proc = procs.run(redis_url, "produce", [PYTHON, str(CELERY_PROJECT / "produce.py"), *flags], **ENV)
    assert wait_exit(proc, 120) == 0, proc.output()
    return json.loads(proc.output().strip().splitlines()[-1])


def test_the_standard_project_runs_on_a_worker(procs: Processes, redis_url: str, tmp_path: Path) -> None:
    worker = run_worker(procs, redis_url)
    out = produce(procs, redis_url, "--workflows")
    # task_default_queue and task_routes gave the queues; the worker served them by default.
    assert out["queues"] == {"proj.celery.debug_task": "proj", "shop.tasks.add": "proj",
                             "shop.tasks.slow_double": "proj-slow", "shop.tasks.xsum": "proj"}  # fmt: skip
    assert out["debug_task"] is None and out["delay"] == 5 and out["send_task"] == 9 and out["routed"] == 42
    assert out["group"] == [i + i for i in range(10)]
    assert out["starmap"] == [2, 4] and out["chunks"] == [[0, 2], [4, 6], [8]]
    assert out["chain"] == 16 and out["chord"] == 90 and out["pipe"] == 23  # Celery's canvas guide, unchanged
    log = worker.output()
    assert "Request: Request(id=" in log  # debug_task's print, with self.request
    for setting in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "CELERY_TASK_SOFT_TIME_LIMIT"):
        assert log.count(f"Celery setting {setting} is ignored") == 1, log
    assert "CELERY_ACCEPT_CONTENT" not in log and "CELERY_TASK_DEFAULT_QUEUE" not in log
