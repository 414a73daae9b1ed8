"""The demo load (project/demo.py, `manage.py demo`): its mix has every kind of job the console shows, it
keeps queues bounded, and its failing jobs end as dead letters of distinct fingerprints."""

import subprocess
from collections import Counter
from pathlib import Path

import redis

import jobconsole.examples  # noqa: F401  (registers the example tasks)
from jobconsole.core import Client, JobSpec, JobState, default_registry
from jobconsole.mirror.rows import fingerprint
from project.demo import MIX, QUEUES, DemoLoad
from tests.conftest import PROJECT, PYTHON, manage_env
from tests.helpers import wait_for, worker_in_thread


def test_the_mix_covers_every_kind_of_job(r: "redis.Redis") -> None:
    load = DemoLoad(Client(r), max_backlog=1000, seed=7)
    specs = [load.make() for _ in range(600)]
    tasks = Counter(spec.task for spec in specs)
    assert set(tasks) == {maker(load.rng).task for _, maker in MIX}  # every kind came up
    assert {load.queue_of(spec) for spec in specs} == set(QUEUES)
    assert any(spec.delay and spec.delay >= 60 for spec in specs)  # scheduled minutes ahead
    assert any(spec.unique_key for spec in specs)
    assert any(spec.priority == "low" for spec in specs)
    assert any(s.params and s.params.get("to", "").endswith("@bounce.example.com") for s in specs)  # failing
    assert any(s.params and s.params.get("card_last4") == "0002" for s in specs)
    assert any(s.params and "SKU-00000,n/a" in s.params.get("rows", []) for s in specs)

    load.enqueue(specs)
    counts = {q: Client(r).counts(q) for q in QUEUES}
    assert counts["emails"].scheduled > 0
    assert load.tally["created"] > 500
    assert load.tally["duplicate"] > 0  # a second search-index job for a shard already waiting


def test_a_queue_with_max_backlog_waiting_gets_no_more(r: "redis.Redis") -> None:
    client = Client(r)
    load = DemoLoad(client, max_backlog=5, seed=1)
    image = JobSpec(task="examples.resize_image", params={"image_id": 1})
    for _ in range(20):
        load.enqueue([image])
    assert client.counts("default").queued == 5
    assert load.tally == Counter(created=5, skipped=15)


def test_the_failing_jobs_end_as_dead_letters_of_distinct_fingerprints_and_flaky_ones_succeed(
    r: "redis.Redis",
) -> None:
    client = Client(r)
    failing = {
        client.enqueue("examples.send_welcome_email", {"to": "ana1@bounce.example.com"}).id: "_deliver",
        client.enqueue("examples.charge_card", {"customer_id": 95_000, "amount_cents": 100}).id: "_lookup_customer",
        client.enqueue("examples.charge_card", {"customer_id": 7, "amount_cents": 100, "card_last4": "0002"}).id: (
            "_authorize"
        ),
        client.enqueue("examples.import_csv", {"rows": ["SKU-1,3", "SKU-00000,n/a"]}).id: "_parse_row",
    }
    flaky = client.enqueue("examples.sync_inventory", {"sku": "SKU-1", "flaky_attempts": 2}).id
    with worker_in_thread(r, default_registry, list(QUEUES), concurrency=8):
        wait_for(lambda: all(client.get(j).state is JobState.DEAD for j in failing), timeout=30)
        wait_for(lambda: client.get(flaky).state is JobState.COMPLETED, timeout=30)

    last_attempts = {job_id: client.get(job_id).history[-1] for job_id in failing}
    assert {job_id: a.top_frame.rsplit(" in ", 1)[1] for job_id, a in last_attempts.items()} == failing
    assert {a.error_class for a in last_attempts.values()} == {
        "jobconsole.examples.MailboxUnavailable", "KeyError", "jobconsole.examples.PaymentDeclined", "ValueError",
    }  # fmt: skip
    assert len({fingerprint(a.error_class, a.top_frame) for a in last_attempts.values()}) == 4
    declined = next(j for j, frame in failing.items() if frame == "_authorize")
    assert client.get(declined).attempts == 1  # a permanent error: no retry
    assert client.get(flaky).attempts == 3
    assert client.get(flaky).result == {"sku": "SKU-1", "stock": client.get(flaky).result["stock"], "attempt": 3}


def test_the_demo_command_runs_alone_for_a_while(redis_url: str, r: "redis.Redis", tmp_path: Path) -> None:
    result = subprocess.run(
        [PYTHON, "manage.py", "demo", "--rate", "50", "--duration", "1.5", "--seed", "3"],
        cwd=PROJECT, env=manage_env(redis_url, tmp_path), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "demo: about 50 jobs a second" in result.stdout
    assert "demo: stopped; created" in result.stdout
    client = Client(r)
    waiting = sum(client.counts(q).queued + client.counts(q).scheduled for q in QUEUES)
    assert 20 <= waiting <= 150  # about 75 at 50 a second for 1.5 s


def test_the_demo_command_refuses_a_rate_of_zero(redis_url: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [PYTHON, "manage.py", "demo", "--rate", "0"],
        cwd=PROJECT, env=manage_env(redis_url, tmp_path), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "rate must be more than 0 jobs a second" in result.stderr


def test_the_demo_runs_catalogue_imports_as_workflows_whose_report_waits_for_every_member(r: "redis.Redis") -> None:
    client = Client(r)
    load = DemoLoad(client, seed=3)
    workflow_id = load.start_workflow()
    view = client.queries.workflows.get(workflow_id, "reports")
    assert view is not None and view.name.startswith("catalogue import ")
    states = {step.name: step.state for step in view.steps}
    assert states.pop("import.complete") is JobState.WAITING  # the report, until every member ended
    assert len(states) >= 9 and set(states.values()) == {JobState.QUEUED}
    assert load.tally["workflow jobs"] == len(states) + 1
