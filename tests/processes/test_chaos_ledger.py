"""The chaos ledger books a run at the moment the worker let it begin, not when the task's first line ran."""

import time
from pathlib import Path

import pytest

from chaos import tasks
from chaos.ledger import ENV, Ledger
from jobconsole.core import JobContext, TaskRegistry
from jobconsole.core.execution import RunningJob


def test_a_run_is_booked_when_the_worker_let_it_begin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "ledger.sqlite3"))
    monkeypatch.setattr(tasks, "_ledger", None)
    registry = TaskRegistry()
    context = JobContext(job_id="j1", queue="chaos", task="t", attempt=2, max_retries=3, checkpoint=None,
                         send_heartbeat=lambda progress, checkpoint: None)  # fmt: skip
    # The worker passed run_sync's gate 3 s ago; the process was then frozen (SIGSTOP) before the task's
    # first line ran. The run began under the lease it held then, not now.
    job = RunningJob(id="j1", queue="chaos", token="w1:7", task=registry.register(lambda: None, name="t"),
                     attempt=2, max_retries=3, params={}, context=context, lease_s=1.0, timeout_s=None,
                     started=time.monotonic() - 3.0)  # fmt: skip

    def run_sync(job: RunningJob) -> None:  # the engine's frame the harness reads `job` from
        tasks.began(context)

    run_sync(job)
    (execution,) = Ledger(tmp_path / "ledger.sqlite3").executions()
    assert (execution.job_id, execution.attempt, execution.token, execution.worker) == ("j1", 2, "w1:7", "w1")
    assert time.time() - 3.2 < execution.started < time.time() - 2.8


def test_a_run_outside_a_worker_is_booked_now(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "ledger.sqlite3"))
    monkeypatch.setattr(tasks, "_ledger", None)
    context = JobContext(job_id="j2", queue="chaos", task="t", attempt=1, max_retries=0, checkpoint=None,
                         send_heartbeat=lambda progress, checkpoint: None)  # fmt: skip
    tasks.began(context)
    (execution,) = Ledger(tmp_path / "ledger.sqlite3").executions()
    assert execution.token == "?:?" and abs(execution.started - time.time()) < 0.5
