"""`make run`'s supervisor (scripts/run_stack.py) run as a user runs it, with its own redis-server, var dir
and port: a worker killed with SIGKILL mid-job is restarted and the job recovered; WORKERS=2 and DEMO=1;
SIGTERM stops every process of the stack; Redis dying stops the stack too."""

import os
import re
import signal
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

import tests.tasks  # noqa: F401  (registers tests.record here, so the client enqueues it with its 2 s lease)
from jobconsole.bulk.system import SYSTEM_QUEUE
from jobconsole.core import Client, JobState
from jobconsole.core.connection import connect
from scripts.stack.supervisor import Backoff, describe_exit
from tests.conftest import PROJECT, PYTHON, manage_env
from tests.live import alive, command_line, descendants, wait_until
from tests.redis_server import free_port
from tests.tasks import read_ledger

STARTUP_S = 120  # migrate, collectstatic (compressing every file), gunicorn and the workers, on a busy 2-core machine


class Stack:
    """`python scripts/run_stack.py` in a var dir of its own; its output goes to stack.log."""

    def __init__(self, tmp_path: Path, unset: tuple[str, ...] = (), **env: str) -> None:
        self.log = tmp_path / "stack.log"
        self.var = tmp_path / "var"
        environ = manage_env("", tmp_path, PORT=str(free_port()), **env)
        for name in ("REDIS_URL", *unset):  # the stack starts its own redis-server
            del environ[name]
        with self.log.open("wb") as out:
            self.popen = subprocess.Popen(
                [PYTHON, "scripts/run_stack.py"], cwd=PROJECT, env=environ, stdout=out, stderr=subprocess.STDOUT
            )
        self._client: Client | None = None

    def output(self) -> str:
        # The supervisor colours its prefixes; the tests read plain text.
        return re.sub(r"\033\[[0-9;]*m", "", self.log.read_text(errors="replace"))

    def wait_for(self, text: str, timeout: float = 30) -> None:
        wait_until(lambda: text in self.output(), timeout, repr(text), self.output)

    @property
    def client(self) -> Client:
        if self._client is None:
            self.wait_for("[stack", STARTUP_S)
            url = wait_until(lambda: self._redis_url(), STARTUP_S, "var/redis.url", self.output)
            self._client = Client(connect(url))
        return self._client

    def _redis_url(self) -> str:
        path = self.var / "redis.url"
        return path.read_text().strip() if path.exists() else ""

    def running_workers(self, count: int) -> list[str]:
        """The ids of the `count` registered, running workers, once there are that many."""

        def running() -> list[str]:
            # Each runworker also registers its system worker (the bulk operations' queue): not counted here.
            ids = [
                w.id for w in self.client.queries.workers.all() if w.state == "running" and w.queues != [SYSTEM_QUEUE]
            ]
            return ids if len(ids) == count else []

        return wait_until(running, STARTUP_S, f"{count} running workers", self.output)

    def mirrored_completed(self) -> int:
        """Completed jobs in the stack's own database (SQLite in its var dir), as the mirror wrote them."""
        with closing(sqlite3.connect(self.var / "jobconsole.sqlite3", timeout=5)) as db:
            return int(db.execute("SELECT count(*) FROM jobconsole_job WHERE state = 'completed'").fetchone()[0])

    def processes(self) -> dict[int, str]:
        return {pid: command_line(pid) for pid in descendants(self.popen.pid)}

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 40) -> int:
        self.popen.send_signal(sig)
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the stack did not stop within {timeout}s\n{self.output()[-6000:]}")

    def kill(self) -> None:
        for pid in [*descendants(self.popen.pid), self.popen.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.popen.wait(timeout=10)


@pytest.fixture
def start_stack(tmp_path: Path) -> Iterator[Callable[..., Stack]]:
    started: list[Stack] = []

    def start(unset: tuple[str, ...] = (), **env: str) -> Stack:
        stack = Stack(tmp_path, unset, **env)
        started.append(stack)
        return stack

    yield start
    for stack in started:  # whatever a failed test left
        stack.kill()
        if stack._client is not None:
            stack._client.redis.close()


def assert_all_gone(pids: dict[int, str], stack: Stack) -> None:
    left = {pid: cmd for pid, cmd in pids.items() if alive(pid)}
    assert not left, f"still running after the stack stopped: {left}\n{stack.output()[-4000:]}"


@pytest.mark.slow
@pytest.mark.timeout(300)  # about 40 s on a quiet machine; start-up takes long on a loaded one
def test_a_killed_worker_is_restarted_and_its_job_recovered_and_redis_dying_stops_the_stack(
    start_stack: Callable[..., Stack], tmp_path: Path
) -> None:
    stack = start_stack()
    [first_id] = stack.running_workers(1)
    ledger = tmp_path / "ledger"
    job_id = stack.client.enqueue("tests.record", {"ledger": str(ledger), "seconds": 2.0}).id
    [(_, _, attempt, pid)] = wait_until(lambda: read_ledger(ledger), 30, "the job to start", stack.output)
    assert attempt == "1" and f":{pid}:" in first_id
    os.kill(int(pid), signal.SIGKILL)

    # One worker process: the runworker is that process (no supervisor of its own), and the stack starts it again.
    stack.wait_for(f"worker (pid {pid}) was killed by SIGKILL after")
    assert "restarting it in 1 s" in stack.output()
    stack.wait_for("worker started again: pid", 10)
    new_pid = int(re.findall(r"worker started again: pid (\d+)", stack.output())[-1])
    job = wait_until(
        lambda: (j := stack.client.get(job_id)).state is JobState.COMPLETED and j, 30, "the job to complete",
        stack.output,
    )  # fmt: skip
    assert [(a.outcome, a.pid) for a in job.history] == [("worker_lost", int(pid)), ("completed", new_pid)]
    [second_id] = stack.running_workers(1)
    assert second_id != first_id and f":{new_pid}:" in second_id  # a new worker id: the old one shows as gone
    assert stack.popen.poll() is None and alive(new_pid)

    # Redis is the one process whose exit stops everything.
    processes = stack.processes()
    [redis_pid] = [p for p, cmd in processes.items() if cmd.startswith("redis-server") or "/redis-server" in cmd]
    os.kill(redis_pid, signal.SIGKILL)
    assert stack.popen.wait(timeout=40) == 1
    assert f"redis (pid {redis_pid}) was killed by SIGKILL" in stack.output()
    assert "the stack stops" in stack.output()
    assert_all_gone(processes, stack)


@pytest.mark.slow
@pytest.mark.timeout(300)  # about 25 s on a quiet machine
def test_two_workers_and_the_demo_run_apart_and_sigterm_stops_everything(start_stack: Callable[..., Stack]) -> None:
    stack = start_stack(WORKERS="2", DEMO="1", DEMO_RATE="20")
    ids = stack.running_workers(2)
    assert len(set(ids)) == 2

    def demo_queues() -> set[str]:
        return {q for q in ("default", "emails", "reports") if stack.client.counts(q).completed}

    wait_until(lambda: demo_queues() == {"default", "emails", "reports"}, 60, "demo jobs to complete", stack.output)
    processes = stack.processes()
    workers = [cmd for cmd in processes.values() if " runworker " in cmd]
    # One runworker of two processes (its supervisor's command line is theirs too); they leave the system queue to
    # a runworker of its own, as the Procfile does.
    assert sum("--processes 2" in cmd for cmd in workers) == 3 and len(workers) == 4, workers
    assert all("--no-system-worker" in cmd for cmd in workers), workers
    assert [cmd for cmd in workers if f"--queues {SYSTEM_QUEUE}" in cmd], workers
    # The system runworker registers on its own schedule (a loaded machine starts it seconds after the others).
    wait_until(
        lambda: any(w.queues == [SYSTEM_QUEUE] for w in stack.client.queries.workers.all() if w.state == "running"),
        60,
        "the system queue's worker to register",
        stack.output,
    )
    assert any(" demo" in cmd for cmd in processes.values())
    # The database mirror runs in a process of its own, as the Procfile has it, and no worker runs it.
    assert [cmd for cmd in processes.values() if " runmirror" in cmd], processes
    assert all("--no-mirror" in cmd for cmd in workers), workers
    wait_until(stack.mirrored_completed, 60, "the mirror to write completed jobs", stack.output)

    assert stack.stop() == 0
    out = stack.output()
    assert "SIGTERM: stopping demo, then worker, then system, then mirror, then web, then redis" in out
    # The seeds' clients work unchanged against `make run` (they had no tokens), and the log says so.
    assert "open to callers without a token (JOBCONSOLE_API_ANONYMOUS_SEEDS=1)" in out
    # Workers stop before Redis: both said so while Redis was still up.
    workers_stopped = [out.index(f"worker={i} stopped") for i in ids]
    assert max(workers_stopped) < out.index("Redis is now ready to exit"), out[-4000:]
    assert "restarting" not in out and "starting it again" not in out  # a stop is not a crash
    assert out.rstrip().endswith("stopped")
    assert_all_gone(processes, stack)


def readme_second_shell_commands() -> list[str]:
    """The commands of the README's "In a second shell, while `make run` runs" block, as written."""
    readme = (PROJECT / "README.md").read_text()
    after = readme[readme.index("In a second shell, while `make run` runs") :]
    start = after.index("```sh\n") + len("```sh\n")
    block = after[start : after.index("\n```", start)]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_readme_second_shell_commands_work_as_written_beside_make_run(
    start_stack: Callable[..., Stack], tmp_path: Path
) -> None:
    """From a fresh checkout: `make run` (no SECRET_KEY, it turns DEBUG on), then the README's commands in another
    shell with nothing exported (no DEBUG, no SECRET_KEY, no REDIS_URL): each exits 0 and does what it says."""
    stack = start_stack(unset=("SECRET_KEY", "JOBCONSOLE_TASK_MODULES"))
    stack.running_workers(1)
    # The README's list of what `make run` starts names every process the stack prefixes its log with.
    listed = (PROJECT / "README.md").read_text().split("## What `make run` does")[1].split("\n## ")[0]
    commands = " ".join(stack.processes().values())
    assert " runmirror" in commands and " runworker " in commands and "gunicorn" in commands
    assert [n for n in ("redis", "web", "worker", "system", "mirror") if f"`{n}`" not in listed] == []
    exported = {"SECRET_KEY", "DEBUG", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "JOBCONSOLE_TASK_MODULES"}
    shell = {k: v for k, v in os.environ.items() if k not in exported}
    shell["JOBCONSOLE_VAR_DIR"] = str(stack.var)  # the checkout's var/, here the test's own
    commands = readme_second_shell_commands()
    assert [c.split()[2:4] for c in commands] == [
        ["enqueue", "examples.echo"], ["enqueue", "examples.fail"], ["jobs", "queues"], ["jobs", "show"],
        ["jobs", "requeue"],
    ]  # fmt: skip
    assert all(c.startswith(".venv/bin/python manage.py ") for c in commands)

    def run(command: str, job_id: str = "") -> str:
        line = command.replace("<job id>", job_id).replace(".venv/bin/python", PYTHON, 1)
        result = subprocess.run(line, shell=True, cwd=PROJECT, env=shell, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, f"{command}\n{result.stdout}{result.stderr}"
        return result.stdout

    echo_id = run(commands[0]).split()[0]
    fail_ids = [line.split()[0] for line in run(commands[1]).splitlines()]
    assert len(fail_ids) == 5
    wait_until(lambda: stack.client.get(echo_id).state is JobState.COMPLETED, 60, "the echo job", stack.output)
    wait_until(lambda: stack.client.get(fail_ids[0]).state is JobState.DEAD, 60, "a dead fail job", stack.output)
    assert re.search(r"^examples\.echo .* completed=1 ", run(commands[2]), re.M)
    shown = run(commands[3], echo_id)
    assert echo_id in shown and "completed" in shown
    first_run = len(stack.client.get(fail_ids[0]).history)
    assert run(commands[4], fail_ids[0]).strip() == "queued"
    # Brought back, it runs again: more attempts in its history than its first life had.
    wait_until(lambda: len(stack.client.get(fail_ids[0]).history) > first_run, 60, "the requeued job", stack.output)


def test_backoff_doubles_to_its_limit_and_starts_over_after_a_stable_run() -> None:
    backoff = Backoff(first=1, limit=30, stable_after=60)
    assert [backoff.delay_after(uptime=0.5) for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff.delay_after(uptime=59) == 30  # crashing after a while is still crashing
    assert backoff.delay_after(uptime=60) == 1  # up a minute: a new incident, not the same crash loop
    assert backoff.delay_after(uptime=1) == 2


def test_exits_are_described_by_code_or_signal() -> None:
    assert describe_exit(0) == "exited with code 0"
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(-9) == "was killed by SIGKILL"
    assert describe_exit(-15) == "was killed by SIGTERM"


def test_the_stack_refuses_a_worker_count_that_is_not_a_number(tmp_path: Path) -> None:
    env = manage_env("", tmp_path, WORKERS="two")
    result = subprocess.run(
        [PYTHON, "scripts/run_stack.py"], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 1
    assert "WORKERS='two': give a number of worker processes" in result.stderr
    assert not (tmp_path / "var" / "redis.url").exists()  # refused before starting anything
