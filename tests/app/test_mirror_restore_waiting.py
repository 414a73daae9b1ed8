"""After a Redis rollback the mirror puts back the jobs waiting for other jobs (jobconsole/mirror/restore.py,
core/restoring.py): waiting, with their edges, release options and workflow record; released (once) when every
parent had ended, cancelled when a failed parent says so, waiting when a parent is still pending. A real
redis-server, flushed; run on SQLite and, with DATABASE_URL, on PostgreSQL."""

from typing import Any

import pytest

from jobconsole.core import JobSpec
from jobconsole.core.keys import queue_keys
from jobconsole.core.queries.events import events_of as read_events
from jobconsole.core.workflows import RUN, Step
from jobconsole.mirror.loop import Mirror
from jobconsole.mirror.restore import restore_lost_jobs
from jobconsole.models import Job, MirrorResync, Workflow
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import assert_db_matches_redis, run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

LATER = "restore.later"  # a queue no worker serves until the test says so: its jobs stay pending


def events_of(r: Any, queue: str, job_id: str, event: str) -> int:
    """How many `event`s of the job the stream holds (a batch entry counts once per job it names)."""
    entries = r.xrange(queue_keys(queue).events)
    return sum(1 for entry_id, fields in entries for e in read_events(queue, entry_id, fields)
               if e.fields["job"] == job_id and e.fields["event"] == event)  # fmt: skip


def drain(r: Any) -> None:
    mirror = Mirror(r, batch=200, block_ms=20)
    try:
        mirror.drain()
        mirror.release()
    finally:
        mirror.writer.close()


def test_waiting_jobs_come_back_with_their_edges_and_the_workflow_goes_on(client: Any, r: Any) -> None:
    steps = [
        Step("a", JobSpec(task="examples.echo", params={"n": 1})),
        Step("x", JobSpec(task="examples.echo", params={"n": 2}, queue=LATER)),
        Step("d", JobSpec(task="examples.echo", params={"extra": 3}), after=["a", "x"], pass_results="results"),
        Step("e", JobSpec(task="examples.echo", params={"n": 5}), after={"d": RUN}),
    ]
    made = client.enqueue_workflow(steps, name="restore me")
    ids = made.job_ids_by_step
    run_worker(r, ["examples.echo"])  # a completes; d waits for x, e for d
    drain(r)
    states = dict(Job.objects.filter(workflow_id=made.workflow_id).values_list("step", "state"))
    assert states == {"a": "completed", "x": "queued", "d": "waiting", "e": "waiting"}

    r.flushall()  # Redis restarted without its data
    drain(r)
    rewound = MirrorResync.objects.filter(reason="redis-rewound")
    assert sum(rewound.values_list("restored", flat=True)) == 3  # x enqueued, d and e waiting
    assert client.get(ids["x"]).state.value == "queued"
    d = client.get(ids["d"])
    assert d.state.value == "waiting" and d.raw["workflow"] == made.workflow_id and d.raw["step"] == "d"
    links = client.queries.workflows.links(ids["d"], "examples.echo")
    assert [(p.job_id, p.step, p.ended) for p in links.parents] == [(ids["a"], "a", "completed"), (ids["x"], "x", "")]
    assert client.get(ids["e"]).state.value == "waiting"
    view = client.queries.workflows.get(made.workflow_id, made.queue)  # the record is back, with every step
    assert view is not None and view.name == "restore me" and [s.name for s in view.steps] == ["a", "x", "d", "e"]
    assert_db_matches_redis(r)

    while run_worker(r, ["examples.echo", LATER]):  # x ends: d is released, then e
        pass
    d = client.get(ids["d"])
    assert d.state.value == "completed" and d.attempts == 1
    assert d.result == {"extra": 3, "results": {"a": {"n": 1}, "x": {"n": 2}}}
    assert client.get(ids["e"]).state.value == "completed"
    assert events_of(r, "examples.echo", ids["d"], "released") == 1
    drain(r)
    row = Workflow.objects.get(id=made.workflow_id)
    assert row.state == "completed" and row.counts == {"completed": 4}
    assert set(Job.objects.filter(workflow_id=made.workflow_id).values_list("step", flat=True)) == {"a", "x", "d", "e"}


def test_a_waiting_job_whose_parents_all_ended_is_released_once_or_cancelled(client: Any, r: Any) -> None:
    """The database saw the parents end but not yet their dependents' release (the mirror lags): the restore
    releases (or cancels) them itself, once, however often it runs."""
    steps = [
        Step("a", JobSpec(task="examples.echo", params={"n": 1})),
        Step("bad", JobSpec(task="examples.fail", params={"message": "no"}, max_retries=0)),
        Step("x", JobSpec(task="examples.echo", params={"n": 2}, queue=LATER)),
        Step("d", JobSpec(task="examples.echo", params={}), after=["a"], pass_results="results"),  # released
        Step("c", JobSpec(task="examples.echo", params={}), after=["a", "bad"]),  # cancelled: bad did not complete
        Step("g", JobSpec(task="examples.echo", params={}), after={"bad": RUN, "x": RUN}),  # waits for x
        Step("death", JobSpec(task="examples.echo", params={}), after={"a": RUN, "bad": RUN}, when="first_failure"),
    ]
    made = client.enqueue_workflow(steps, name="lagging")
    ids = made.job_ids_by_step
    drain(r)
    run_worker(r, ["examples.fail"])
    run_worker(r, ["examples.echo"], concurrency=1)
    drain(r)
    assert client.get(ids["d"]).state.value == "completed" and client.get(ids["death"]).state.value == "completed"
    # The mirror had seen the parents end, not their dependents' release; then Redis lost everything.
    lagging = [ids["d"], ids["c"], ids["death"]]
    Job.objects.filter(id__in=lagging).update(state="waiting", result="", attempts=0, finished_at=None)
    r.flushall()
    drain(r)
    assert client.get(ids["d"]).state.value == "queued"
    assert client.get(ids["d"]).params == {"results": {"a": {"n": 1}}}
    assert client.get(ids["c"]).state.value == "cancelled"
    assert client.get(ids["death"]).state.value == "queued"  # its first failure: bad died
    assert client.get(ids["g"]).state.value == "waiting"
    again = restore_lost_jobs(r, list(Job.objects.filter(id__in=[*lagging, ids["g"]])))  # a repeated restore
    assert again.created == 0 and again.ids >= {ids["d"], ids["death"], ids["g"]}
    for job in lagging:
        assert events_of(r, "examples.echo", job, "released") + events_of(r, "examples.echo", job, "cancelled") == 1

    while run_worker(r, ["examples.echo", LATER]):
        pass
    assert client.get(ids["d"]).attempts == 1 and client.get(ids["g"]).state.value == "completed"
    drain(r)
    assert Workflow.objects.get(id=made.workflow_id).state == "failed"
    assert_db_matches_redis(r)


def test_a_depends_on_job_comes_back_waiting_for_its_parent(client: Any, r: Any) -> None:
    parent = client.enqueue("examples.echo", {"p": 1}, queue=LATER)
    child = client.enqueue("examples.echo", {"c": 1}, depends_on=[parent])
    drain(r)
    r.flushall()
    drain(r)
    assert client.get(child.id).state.value == "waiting" and client.get(parent.id).state.value == "queued"
    while run_worker(r, ["examples.echo", LATER]):
        pass
    assert client.get(child.id).state.value == "completed"


def test_a_rollback_to_an_older_aof_puts_a_lost_dependent_back_under_its_pending_parent(
    own_redis: Any, tmp_path: Any
) -> None:
    """Redis restarts on an AOF copied before a dependent was enqueued (its parent was there already): the
    dependent comes back waiting, in its parent's children, and the parent's end releases it."""
    from jobconsole.core import Client
    from jobconsole.core.connection import connect

    conn = connect(own_redis.url)
    parent = Client(conn).enqueue("examples.echo", {"p": 1}, queue=LATER)
    drain(conn)
    own_redis.copy_aof(tmp_path / "backup")
    child = Client(conn).enqueue("examples.echo", {"c": 1}, depends_on=[parent])
    drain(conn)
    conn.close()
    own_redis.kill()
    own_redis.restore_aof(tmp_path / "backup")
    own_redis.start()
    conn = connect(own_redis.url)
    client = Client(conn)
    with pytest.raises(Exception, match="no job"):
        client.get(child.id)  # the rollback lost it
    drain(conn)
    assert MirrorResync.objects.filter(reason="redis-rewound").exists()
    assert client.get(child.id).state.value == "waiting" and client.get(parent.id).state.value == "queued"
    assert_db_matches_redis(conn)
    while run_worker(conn, ["examples.echo", LATER]):
        pass
    assert client.get(child.id).state.value == "completed" and client.get(child.id).attempts == 1
    assert events_of(conn, "examples.echo", child.id, "released") == 1
    conn.close()


def test_a_chain_whose_ids_run_backwards_comes_back_parents_first(client: Any, r: Any) -> None:
    """Steps given ids of their own, later steps smaller: the restore orders them by their links, not their ids
    (a child put back before its parent would find no parent and count it dropped)."""
    ids = [f"01JD00000000000000000000{n:02d}" for n in (9, 8, 7, 6)]
    steps = [Step("s0", JobSpec(task="examples.echo", params={"n": 0}, id=ids[0], queue=LATER))]
    steps += [Step(f"s{n}", JobSpec(task="examples.echo", params={"n": n}, id=ids[n]), after=[f"s{n - 1}"])
              for n in (1, 2, 3)]  # fmt: skip
    made = client.enqueue_workflow(steps)
    drain(r)
    r.flushall()
    drain(r)
    assert [client.get(i).state.value for i in ids] == ["queued", "waiting", "waiting", "waiting"]
    while run_worker(r, ["examples.echo", LATER]):
        pass
    assert [client.get(i).state.value for i in ids] == ["completed"] * 4
    drain(r)
    assert Workflow.objects.get(id=made.workflow_id).state == "completed"
