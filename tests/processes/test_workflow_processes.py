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
from pathlib import Path

import pytest
import redis

import tests.tasks  # noqa: F401  (registers tests.record here, so the client enqueues it with its lease)
from jobconsole.core import Client, JobSpec
from jobconsole.core.compose import chain, chord, group
from jobconsole.core.keys import queue_keys
from jobconsole.core.workflows import Step
from tests.processes.test_worker_processes import Processes, procs, wait_for  # noqa: F401  (the fixture)
from tests.tasks import read_ledger

pytestmark = pytest.mark.slow

QUEUE = "tests.record"


def record(ledger: Path, seconds: float, tag: str) -> JobSpec:
    # A first run long enough to be killed in, quick runs after (retry_seconds), so recovery is what is measured.
    return JobSpec(task="tests.record", params={"ledger": str(ledger), "seconds": seconds, "tag": tag,
                                                "retry_seconds": 0.05})  # fmt: skip


def test_a_workflow_completes_exactly_once_per_step_while_workers_are_killed(
    r: "redis.Redis",
    redis_url: str,
    procs: Processes,
    tmp_path: Path,  # noqa: F811
) -> None:
    rng = random.Random(29)
    client = Client(r)
    ledger = tmp_path / "ledger"

    def spec(tag: str) -> JobSpec:
        return record(ledger, rng.uniform(0.5, 1.5), tag)

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
    made = client.enqueue_workflow([*flow, *diamond], name="chaos")
    # Parents of each step, by job id.
    parents = {s.name: list(s.parents()) for s in [*flow, *diamond]}
    ids = made.job_ids_by_step
    step_of = {job_id: step for step, job_id in ids.items()}

    workers = [procs.worker(redis_url, QUEUE, f"w{i}", "--concurrency", "4") for i in range(3)]

    def open_runs(pid: int) -> int:
        runs = Counter((line[1], line[2]) for line in read_ledger(ledger) if int(line[3]) == pid and line[0] == "start")
        runs.subtract((line[1], line[2]) for line in read_ledger(ledger) if int(line[3]) == pid and line[0] == "end")
        return sum(1 for n in runs.values() if n > 0)

    def finished() -> bool:
        view = client.queries.workflow(made.workflow_id, made.queue)
        return view is not None and view.counts() == {"completed": len(ids)}

    # Kill -9 a worker in the middle of running steps, up to five times, each replaced by a new one.
    kills = 0
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and kills < 5 and not finished():
        time.sleep(rng.uniform(0.2, 0.6))
        busy = [i for i, w in enumerate(workers) if open_runs(w.pid) > 0]
        if not busy:
            continue
        victim = rng.choice(busy)
        workers[victim].popen.kill()
        workers[victim].popen.wait()
        kills += 1
        workers[victim] = procs.worker(redis_url, QUEUE, f"w{len(procs.started)}", "--concurrency", "4")
    assert kills >= 3

    wait_for(finished, 120, "every step to complete", *workers)
    time.sleep(0.5)  # a duplicate run would show in the ledger by now

    lines = read_ledger(ledger)
    starts: dict[str, list[int]] = {}
    last_end: dict[str, int] = {}
    for index, (kind, job_id, *_rest) in enumerate(lines):
        if kind == "start":
            starts.setdefault(step_of[job_id], []).append(index)
        else:
            last_end[step_of[job_id]] = index
    released = Counter(
        fields["job"]
        for _id, fields in r.xrange(queue_keys(QUEUE).events, "-", "+")
        if fields.get("event") == "released"
    )
    reruns = 0
    for step, job_id in ids.items():
        job = client.get(job_id)
        outcomes = [a.outcome for a in job.history]
        # Ran once, or again only after its own run was interrupted.
        assert outcomes.count("completed") == 1 and set(outcomes) <= {"completed", "worker_lost"}, (step, outcomes)
        assert len(starts[step]) == len(outcomes), (step, outcomes, starts[step])
        reruns += len(outcomes) - 1
        if parents[step]:
            assert released[job_id] == 1, (step, released[job_id])
            for parent in parents[step]:
                assert starts[step][0] > last_end[parent], f"{step} started before {parent} ended"
        else:
            assert released[job_id] == 0
    print(f"\nworkflow chaos: {len(ids)} steps, {kills} workers killed, {reruns} interrupted runs re-run")
