"""The read API (core/queries.py): counts, pages of jobs by cursor, workers, statistics, events."""

import redis

from jobconsole.core import Client, JobState, TaskRegistry
from jobconsole.core.queries import Queries
from tests.helpers import claim, complete, run_burst, wait_for, worker_in_thread
from tests.queue_fixtures import *  # noqa: F403  (the client and registry fixtures)


def _pages(queries: Queries, state: JobState, limit: int, **options: object) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        page = queries.jobs("q", state, cursor=cursor, limit=limit, **options)  # type: ignore[arg-type]
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
    first = client.queries.jobs("q", JobState.QUEUED, limit=4)
    claim(r, "q", 4)  # the first page's jobs leave the state
    rest = client.queries.jobs("q", JobState.QUEUED, cursor=first.next_cursor, limit=10)
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
    page = client.queries.jobs("q", JobState.SCHEDULED)
    assert [j.id for j in page.jobs] == [later] and client.queries.jobs("q", JobState.RETRYING).jobs == []


def test_counts_workers_stats_and_events(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    job = client.enqueue("t.ok", {"x": 2}).id
    with worker_in_thread(r, registry, ["q"], name="reader-test") as worker:
        wait_for(lambda: client.get(job).state is JobState.COMPLETED)
        [info] = [w for w in client.queries.workers() if w.id == worker.id]
        assert (info.queues, info.concurrency, info.state) == (["q"], 10, "running")
        assert client.queries.worker_count() == 1
    run_burst(r, registry, ["q"])
    counts = client.queries.counts("q")
    assert (counts.completed, counts.queued, counts.paused) == (1, 0, False)
    stats = {(s.metric, s.task): s.value for s in client.queries.stats("q")}
    assert stats[("enqueued", "t.ok")] == 1 and stats[("completed", "t.ok")] == 1
    events = client.queries.events("q")
    assert [e.name for e in events if e.job == job] == ["enqueued", "started", "completed"]
    newest = client.queries.events("q", newest_first=True, limit=1)
    assert newest[0].id == events[-1].id and client.queries.events("q", after=events[-1].id) == []
    assert "t.ok" in client.queries.task_options()
