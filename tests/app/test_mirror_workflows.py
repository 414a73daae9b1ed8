"""The mirror's workflows: a Workflow row per workflow with its jobs' counts, each job's workflow, step and links."""

import pytest

from jobconsole.core import JobSpec
from jobconsole.core.workflows import Step
from jobconsole.mirror.loop import Mirror
from jobconsole.models import Job, JobLink, Workflow
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def _diamond(client, name="diamond", fail_b=False):
    b = JobSpec(task="examples.echo")
    if fail_b:
        b = JobSpec(task="examples.fail", params={"message": "b"}, max_retries=0)
    return client.enqueue_workflow(
        [
            Step("a", JobSpec(task="examples.echo", params={"step": "a"})),
            Step("b", b, after=["a"]),
            Step("c", JobSpec(task="examples.echo", params={"step": "c"}), after=["a"]),
            Step("d", JobSpec(task="examples.echo", params={"step": "d"}), after=["b", "c"]),
        ],
        name=name,
    )


def test_a_workflow_appears_and_follows_its_jobs(client, mirror, r):
    made = _diamond(client)
    mirror.drain()
    wf = Workflow.objects.get(id=made.workflow_id)
    assert (wf.name, wf.state, wf.size, wf.queue) == ("diamond", "running", 4, made.queue)
    assert wf.counts == {"queued": 1, "waiting": 3} and wf.created_at is not None and wf.finished_at is None
    ids = made.job_ids_by_step
    rows = {j.step: j for j in Job.objects.filter(workflow_id=made.workflow_id)}
    assert {s: j.id for s, j in rows.items()} == ids
    links = {(ln.parent_id, ln.child_id, ln.policy) for ln in JobLink.objects.filter(workflow_id=made.workflow_id)}
    assert links == {
        (ids["a"], ids["b"], "cancel"), (ids["a"], ids["c"], "cancel"),
        (ids["b"], ids["d"], "cancel"), (ids["c"], ids["d"], "cancel"),
    }  # fmt: skip
    for _ in range(3):  # each level released by the one before
        run_worker(r, ["examples.echo"])
    mirror.drain()
    wf.refresh_from_db()
    assert (wf.state, wf.counts) == ("completed", {"completed": 4})
    assert wf.finished_at == Job.objects.get(id=ids["d"]).finished_at
    # Applying again (a replay, a resync) writes the same: no second link, the same counts.
    mirror.resync.queue(made.queue, "test")
    mirror.drain()
    assert JobLink.objects.filter(workflow_id=made.workflow_id).count() == 4
    wf.refresh_from_db()
    assert (wf.state, wf.counts) == ("completed", {"completed": 4})


def test_a_dead_member_then_its_resubmit(client, mirror, r):
    made = _diamond(client, "with a failure", fail_b=True)
    for _ in range(3):
        run_worker(r, ["examples.echo", "examples.fail"])
    mirror.drain()
    wf = Workflow.objects.get(id=made.workflow_id)
    assert wf.state == "failed"
    assert wf.counts == {"completed": 2, "dead": 1, "cancelled": 1}
    client.requeue(made.job_ids_by_step["b"])
    mirror.drain()
    wf.refresh_from_db()
    assert wf.state == "running" and wf.counts["waiting"] == 1


def test_a_cancelled_workflow(client, mirror, r):
    made = _diamond(client, "to cancel")
    mirror.drain()
    client.cancel_workflow(made.workflow_id, made.queue)
    mirror.drain()
    wf = Workflow.objects.get(id=made.workflow_id)
    assert (wf.state, wf.counts) == ("cancelled", {"cancelled": 4})
    assert wf.cancelled_at is not None and wf.finished_at is not None


def test_a_plain_job_has_no_workflow_row(client, mirror):
    client.enqueue("examples.echo", {"x": 1})
    mirror.drain()
    assert Workflow.objects.count() == 0 and Job.objects.get().workflow_id == ""


def test_the_mirror_drains_a_fresh_start_with_workflows(client, r, engine_settings):
    """A mirror's first look at a queue is a resync: the links come from it."""
    made = _diamond(client, "before the mirror")
    m = Mirror(r, block_ms=10)
    m.drain()
    m.writer.close()
    assert JobLink.objects.filter(workflow_id=made.workflow_id).count() == 4
    assert Workflow.objects.get(id=made.workflow_id).counts == {"queued": 1, "waiting": 3}


def test_database_retention_takes_a_workflow_with_its_last_job(client, mirror, r):
    from datetime import UTC, datetime, timedelta

    from jobconsole.cleaning import enforce_db_retention

    made = _diamond(client, "old")
    for _ in range(3):
        run_worker(r, ["examples.echo"])
    mirror.drain()
    enforce_db_retention()
    assert Workflow.objects.filter(id=made.workflow_id).exists()
    Job.objects.filter(workflow_id=made.workflow_id).update(
        in_redis=False, finished_at=datetime.now(UTC) - timedelta(days=400)
    )
    removed = enforce_db_retention()
    assert removed["completed"] == 4 and removed["workflows"] == 1
    assert not Workflow.objects.exists() and not JobLink.objects.exists()
