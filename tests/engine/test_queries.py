"""The read API (core/queries/): counts, pages of jobs by cursor, workers, statistics, events."""

from datetime import UTC, datetime, timedelta

import redis

from jobconsole.core import Client, JobState, TaskRegistry
from jobconsole.core.queries import Queries
from tests.helpers import claim, complete, run_burst, wait_for, worker_in_thread
from tests.queue_fixtures import *  # noqa: F403  (the client and registry fixtures)


def _pages(queries: Queries, state: JobState, limit: int, **options: object) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        page = queries.jobs.page("q", state, cursor=cursor, limit=limit, **options)  # type: ignore[arg-type]
        pages.append([job.id for job in page.jobs])
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


def test_waiting_jobs_page_in_claim_order_and_every_job_comes_once(client: Client) -> None:
    ids = [client.enqueue("t.ok", {"x": i}).id for i in range(23)]
    pages = _pages(client.queries, JobState.QUEUED, 5)
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3]
    assert [i for p in pages for i in p] == ids


def test_a_cursor_survives_jobs_leaving_before_it(r: "redis.Redis", client: Client) -> None:
    ids = [client.enqueue("t.ok").id for _ in range(10)]
    first = client.queries.jobs.page("q", JobState.QUEUED, limit=4)
    claim(r, "q", 4)  # the first page's jobs leave the state
    rest = client.queries.jobs.page("q", JobState.QUEUED, cursor=first.next_cursor, limit=10)
    assert [j.id for j in rest.jobs] == ids[4:] and rest.next_cursor is None


def test_finished_jobs_page_newest_first_even_when_they_share_a_finish_time(r: "redis.Redis", client: Client) -> None:
    ids = [client.enqueue("t.ok").id for _ in range(12)]
    leases = claim(r, "q", 12)
    for lease in leases:
        complete(r, "q", lease.id, lease.token)
    r.zadd("jc:{q:q}:completed", dict.fromkeys(ids[:6], 1000))  # ties: the cursor must still move on
    pages = _pages(client.queries, JobState.COMPLETED, 4)
    seen = [i for p in pages for i in p]
    assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen))
    assert seen[-6:] == sorted(ids[:6], reverse=True)  # oldest finish last; ties in reverse id order


def test_scheduled_and_retrying_share_a_set_but_page_apart(client: Client) -> None:
    later = client.enqueue("t.ok", delay=60).id
    page = client.queries.jobs.page("q", JobState.SCHEDULED)
    assert [j.id for j in page.jobs] == [later] and client.queries.jobs.page("q", JobState.RETRYING).jobs == []


def test_counts_workers_stats_and_events(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    job = client.enqueue("t.ok", {"x": 2}).id
    with worker_in_thread(r, registry, ["q"], name="reader-test") as worker:
        wait_for(lambda: client.get(job).state is JobState.COMPLETED)
        [info] = [w for w in client.queries.workers.all() if w.id == worker.id]
        assert (info.queues, info.concurrency, info.state) == (["q"], 10, "running")
        assert client.queries.workers.count() == 1
    run_burst(r, registry, ["q"])
    counts = client.queries.queues.counts("q")
    assert (counts.completed, counts.queued, counts.paused) == (1, 0, False)
    stats = {(s.metric, s.task): s.value for s in client.queries.stats.minutes("q")}
    assert stats[("enqueued", "t.ok")] == 1 and stats[("completed", "t.ok")] == 1
    events = client.queries.events.read("q")
    assert [e.name for e in events if e.job == job] == ["enqueued", "started", "completed"]
    newest = client.queries.events.read("q", newest_first=True, limit=1)
    assert newest[0].id == events[-1].id and client.queries.events.read("q", after=events[-1].id) == []
    assert "t.ok" in client.queries.tasks.options()


def _timed_pages(queries: Queries, kind: str, limit: int, **options: object) -> list[list[tuple[str, str]]]:
    pages, cursor = [], None
    while True:
        page = queries.jobs.timed(kind, cursor=cursor, limit=limit, **options)  # type: ignore[arg-type]
        pages.append([(t.job.queue, t.job.id) for t in page.jobs])
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


def test_timed_jobs_merge_the_queues_by_time_and_page_through_ties(r: "redis.Redis", client: Client) -> None:
    run_at = datetime.now(UTC) + timedelta(minutes=5)
    in_q = [client.enqueue("t.ok", run_at=run_at).id for _ in range(7)]
    in_q2 = [client.enqueue("t.ok", queue="q2", run_at=run_at).id for _ in range(5)]  # the same time: ties
    sooner = client.enqueue("t.ok", queue="q2", delay=60).id
    client.enqueue("t.ok")  # queued: not waiting for a time
    pages = _timed_pages(client.queries, "scheduled", 4)
    assert [len(p) for p in pages] == [4, 4, 4, 1]
    assert [entry for p in pages for entry in p] == [
        ("q2", sooner), *[("q", i) for i in sorted(in_q)], *[("q2", i) for i in sorted(in_q2)]
    ]  # fmt: skip
    [first] = client.queries.jobs.timed("scheduled", limit=1).jobs
    assert abs((first.at - datetime.now(UTC)).total_seconds() - 60) < 5  # its run-at
    assert _timed_pages(client.queries, "scheduled", 50, queues=["q"]) == [[("q", i) for i in sorted(in_q)]]


def test_a_timed_cursor_survives_jobs_leaving_and_retries_are_listed(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    @registry.task(name="t.fail", queue="q", max_retries=2, retry_delay=600)
    def fail() -> None:
        raise RuntimeError("no")

    retrying = client.enqueue("t.fail").id
    run_burst(r, registry, ["q"])
    delayed = [client.enqueue("t.ok", delay=60 + i).id for i in range(6)]
    first = client.queries.jobs.timed("scheduled", limit=3)
    assert [t.job.id for t in first.jobs] == delayed[:3]
    for job_id in delayed[:4]:  # the first page's jobs and one of the next page's run now
        client.requeue(job_id)
    rest = client.queries.jobs.timed("scheduled", cursor=first.next_cursor, limit=10)
    assert [t.job.id for t in rest.jobs] == [*delayed[4:], retrying] and rest.next_cursor is None
    assert rest.jobs[-1].job.state is JobState.RETRYING


def test_running_jobs_by_lease_deadline_and_the_deadlines(r: "redis.Redis", client: Client) -> None:
    ids = [client.enqueue("t.ok", {"x": i}).id for i in range(3)]
    other = client.enqueue("t.ok", queue="q2").id
    waiting = client.enqueue("t.ok", delay=60).id
    claim(r, "q", 3)
    claim(r, "q2", 1)
    page = client.queries.jobs.timed("running", limit=10)
    assert {t.job.id for t in page.jobs} == {*ids, other}
    assert [t.at for t in page.jobs] == sorted(t.at for t in page.jobs)
    now = client.queries.now()
    assert all(timedelta(seconds=25) < t.at - now <= timedelta(seconds=30) for t in page.jobs)  # 30 s leases
    deadlines = client.queries.jobs.lease_deadlines([("q", ids[0]), ("q", waiting), ("q", "nope")])
    assert deadlines[0] == next(t.at for t in page.jobs if t.job.id == ids[0]) and deadlines[1:] == [None, None]
    assert abs((now - datetime.now(UTC)).total_seconds()) < 2  # Redis's clock, as a datetime


def test_due_counts_by_interval_without_reading_jobs(r: "redis.Redis", client: Client) -> None:
    for delay, queue in ((30, "q"), (90, "q"), (95, "q2"), (600, "q"), (7200, "q2")):
        client.enqueue("t.ok", delay=delay, queue=queue)
    client.enqueue("t.ok")  # due now: not in the scheduled set
    now = client.queries.now()
    bounds = [now + timedelta(seconds=s) for s in (0, 60, 120, 3600)]
    assert client.queries.jobs.due_counts(bounds) == [1, 2, 1]
    assert client.queries.jobs.due_counts(bounds, ["q2"]) == [0, 1, 0]
    assert client.queries.jobs.due_counts([now, now + timedelta(days=1)]) == [5]
    assert client.queries.jobs.due_counts([now]) == []
