"""Workflows under worker crashes: real `manage.py runworker` processes, SIGKILLed at random while a workflow of
chains, a diamond, a fan-out with a callback and nested groups runs. Every step completes, every dependent is
released exactly once and starts only after its parents' last run ended, and a step that ran twice did so only
because its own run was interrupted (its history says worker_lost).

Executions are counted from the tasks' ledger (tests/tasks.py: 'start'/'end' lines appended with O_APPEND and
fsync), so a killed process's runs are counted too.
"""

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

import tests.tasks  # noqa: F401  (registers tests.record here, so the client enqueues it with its lease)
from jobconsole.core import Client, JobSpec
from jobconsole.core.compose import chain, chord, group
from jobconsole.core.connection import connect
from jobconsole.core.keys import queue_keys
from jobconsole.core.workflows import Step
from tests.processes.test_worker_processes import Proc, Processes, procs, wait_for  # noqa: F401  (the fixture)
from tests.redis_server import RedisServer
from tests.tasks import read_ledger

pytestmark = pytest.mark.slow

QUEUE = "tests.record"


def record(ledger: Path, seconds: float, tag: str) -> JobSpec:
    # A first run long enough to be killed in, quick runs after (retry_seconds), so recovery is what is measured.
    return JobSpec(task="tests.record", params={"ledger": str(ledger), "seconds": seconds, "tag": tag,
                                                "retry_seconds": 0.05})  # fmt: skip


@dataclass
class Chaos:
    """A workflow of chains, a 40-member chord, nested groups and a diamond of tests.record jobs."""

    client: Client
    ledger: Path
    rng: random.Random
    ids: dict[str, str] = field(default_factory=dict)
    parents: dict[str, list[str]] = field(default_factory=dict)
    workflow: tuple[str, str] = ("", "")

    def create(self) -> None:
        def spec(tag: str) -> JobSpec:
            return record(self.ledger, self.rng.uniform(0.5, 1.5), tag)

        flow = group(
            chain(spec("c0"), spec("c1"), spec("c2"), spec("c3"), name="chain", pass_results=None),
            chord([spec(f"f{i}") for i in range(40)], spec("callback"), name="fan", pass_results=None),
            group(chain(spec("n0"), spec("n1"), pass_results=None), chain(spec("n2"), spec("n3"), pass_results=None),
                  name="nested"),
            name="wf",
        )  # fmt: skip
        diamond = [
            Step("top", spec("top")),
            Step("left", spec("left"), after=["top"]),
            Step("right", spec("right"), after=["top"]),
            Step("bottom", spec("bottom"), after=["left", "right"]),
        ]
        made = self.client.enqueue_workflow([*flow, *diamond], name="chaos")
        self.ids = made.job_ids_by_step
        self.parents = {s.name: list(s.parents()) for s in [*flow, *diamond]}
        self.workflow = (made.workflow_id, made.queue)

    def finished(self) -> bool:
        try:
            view = self.client.queries.workflows.get(*self.workflow)
        except redis.ConnectionError:
            return False
        return view is not None and view.counts() == {"completed": len(self.ids)}

    def open_runs(self, pid: int) -> int:
        lines = [line for line in read_ledger(self.ledger) if len(line) >= 4]  # one may be half written yet
        runs = Counter((line[1], line[2]) for line in lines if int(line[3]) == pid and line[0] == "start")
        runs.subtract((line[1], line[2]) for line in lines if int(line[3]) == pid and line[0] == "end")
        return sum(1 for n in runs.values() if n > 0)

    def check(self, r: "redis.Redis") -> int:
        """Every step completed once; each dependent released once and started after its parents' last run ended;
        a step ran again only after an interrupted run. Returns how many runs were interrupted."""
        step_of = {job_id: step for step, job_id in self.ids.items()}
        starts: dict[str, list[int]] = {}
        last_end: dict[str, int] = {}
        for index, (kind, job_id, *_rest) in enumerate(read_ledger(self.ledger)):
            if kind == "start":
                starts.setdefault(step_of[job_id], []).append(index)
            else:
                last_end[step_of[job_id]] = index
        released = Counter(
            fields["job"]
            for _id, fields in r.xrange(queue_keys(QUEUE).events, "-", "+")
            if fields.get("event") == "released"
        )
        interrupted = 0
        for step, job_id in self.ids.items():
            outcomes = [a.outcome for a in self.client.get(job_id).history]
            assert outcomes.count("completed") == 1 and outcomes[-1] == "completed", (step, outcomes)
            interrupted += len(starts[step]) - 1
            if self.parents[step]:
                assert released[job_id] == 1, (step, released[job_id])
                for parent in self.parents[step]:
                    assert starts[step][0] > last_end[parent], f"{step} started before {parent} ended"
            else:
                assert released[job_id] == 0
        return interrupted


def start_workers(procs: Processes, url: str, n: int) -> list[Proc]:  # noqa: F811
    return [procs.worker(url, QUEUE, f"w{i}", "--concurrency", "4") for i in range(n)]


def test_a_workflow_completes_exactly_once_per_step_while_workers_are_killed(
    r: "redis.Redis", redis_url: str, procs: Processes, tmp_path: Path  # noqa: F811
) -> None:  # fmt: skip
    chaos = Chaos(Client(r), tmp_path / "ledger", random.Random(29))
    workers = start_workers(procs, redis_url, 3)  # all up before the workflow, so the kills land mid-workflow
    chaos.create()
    # Kill -9 a worker in the middle of running steps, up to five times, each replaced by a new one.
    kills = 0
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and kills < 5 and not chaos.finished():
        time.sleep(chaos.rng.uniform(0.2, 0.6))
        busy = [i for i, w in enumerate(workers) if chaos.open_runs(w.pid) > 0]
        if not busy:
            continue
        victim = chaos.rng.choice(busy)
        workers[victim].popen.kill()
        workers[victim].popen.wait()
        kills += 1
        # Replaced without waiting for it to start (a Django process takes seconds here): kills keep coming.
        name = f"w{len(procs.started)}"
        workers[victim] = procs.manage(redis_url, name, "runworker", "--queues", QUEUE, "--name", name,
                                       "--concurrency", "4")  # fmt: skip
    assert kills >= 3
    wait_for(chaos.finished, 120, "every step to complete", *workers)
    time.sleep(0.5)  # a duplicate run would show in the ledger by now
    interrupted = chaos.check(r)
    print(f"\nworkflow chaos (workers): {len(chaos.ids)} steps, {kills} workers killed, {interrupted} runs re-run")


def test_a_workflow_completes_exactly_once_per_step_across_redis_restarts(
    own_redis: RedisServer, procs: Processes, tmp_path: Path  # noqa: F811
) -> None:  # fmt: skip
    """Redis SIGKILLed twice mid-workflow and started again from its AOF (appendfsync always), a worker killed too:
    what a release wrote went in with the parent's end, or neither did."""
    r = connect(own_redis.url)
    chaos = Chaos(Client(r), tmp_path / "ledger", random.Random(5237))
    workers = start_workers(procs, own_redis.url, 2)
    chaos.create()
    for restart in range(2):
        wait_for(lambda: any(chaos.open_runs(w.pid) for w in workers), 30, "steps to run", *workers)
        time.sleep(chaos.rng.uniform(0.2, 0.8))
        own_redis.kill()
        time.sleep(0.5)
        own_redis.start()
        if restart == 0:
            workers[0].popen.kill()
            workers[0].popen.wait()
            workers[0] = procs.worker(own_redis.url, QUEUE, "w-after", "--concurrency", "4")
    wait_for(chaos.finished, 120, "every step to complete", *workers)
    time.sleep(0.5)
    interrupted = chaos.check(r)
    print(f"\nworkflow chaos (redis): {len(chaos.ids)} steps, 2 Redis restarts, {interrupted} runs re-run")
