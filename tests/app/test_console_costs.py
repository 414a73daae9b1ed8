"""What a console page costs does not grow with the number of queues (issue 30: every page under 300 ms warm at
bench/console_data.py's scale): the overview's SQL queries and Redis round trips stay the same for 2 queues and
for 12, and its chart reads on SQLite take no write lock, so they never wait behind the mirror's writes."""

import sqlite3
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client as WebClient
from django.test.utils import CaptureQueriesContext

from jobconsole.metrics import rollup
from jobconsole.metrics.series import Series
from jobconsole.models import Job
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def operator() -> WebClient:
    browser = WebClient()
    browser.force_login(User.objects.create_superuser(f"op{User.objects.count()}"))
    return browser


def round_trips(r: Any) -> int:
    """Read events Redis has processed: one per round trip of every client (the INFO call itself included)."""
    return int(r.info("stats")["total_reads_processed"])


def overview_cost(browser: WebClient, r: Any) -> tuple[int, int]:
    """SQL queries and Redis round trips of one overview, once its first load has warmed what it caches."""
    assert browser.get("/").status_code == 200
    before = round_trips(r)
    with CaptureQueriesContext(connection) as queries:
        assert browser.get("/").status_code == 200
    return len(queries.captured_queries), round_trips(r) - before


def enqueue_into(client: Any, queues: range) -> None:
    for i in queues:
        client.enqueue("examples.echo", {"i": i}, queue=f"q{i:02d}")
        Job.objects.create(id=f"01JCOST{i:019d}", task="examples.echo", queue=f"q{i:02d}", state="retrying")


def test_the_overviews_queries_and_round_trips_do_not_grow_with_its_queues(client, r):
    browser = operator()
    enqueue_into(client, range(2))
    rollup.rollup()  # every queue has its metrics cursor, as the mirror leader's chore keeps them
    queries_of_2, trips_of_2 = overview_cost(browser, r)
    enqueue_into(client, range(2, 12))
    rollup.rollup()
    queries_of_12, trips_of_12 = overview_cost(browser, r)
    # Before: a retrying count per queue (10 more queries), and per queue a drain, a counts pipeline and three
    # counter reads (50 more round trips).
    assert queries_of_12 == queries_of_2
    assert trips_of_12 - trips_of_2 <= 3, (trips_of_2, trips_of_12)
    page = browser.get("/")
    retrying = {q.name: q.extra["retrying"] for q in page.context["queues"]}
    assert retrying == {f"q{i:02d}": 1 for i in range(12)} | {q: 0 for q in retrying if not q.startswith("q")}
    assert page.context["totals"]["retrying"] == 12


def test_the_charts_poll_reads_only_what_the_charts_draw(client, r):
    browser = operator()
    enqueue_into(client, range(3))
    full = browser.get("/")
    poll = browser.get("/", {"range": "hour"}, headers={"HX-Request": "true"})
    assert poll.status_code == 200 and 'id="overview-charts"' in poll.content.decode()
    assert "overview-live" not in poll.content.decode() and "queues" not in poll.context
    assert poll.context["figures"].keys() == full.context["figures"].keys()


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's write lock")
def test_chart_reads_on_sqlite_do_not_wait_for_a_writer(client, r):
    client.enqueue("examples.echo", {"x": 1})
    rollup.rollup()
    writer = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # as the mirror holds it while it writes a batch
    try:
        started = time.monotonic()
        Series("hour").counts()  # before: BEGIN IMMEDIATE, waiting up to the 20 s timeout, then "locked"
        assert time.monotonic() - started < 5
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_tasks_summary_from_its_charts_buckets_is_the_one_of_every_tasks_list(client, r):
    for i in range(3):
        client.enqueue("examples.echo", {"i": i})
        client.enqueue("examples.fail", {"message": f"boom {i}"}, max_retries=1)
    run_worker(r, ["examples.echo", "examples.fail"])
    rollup.rollup()  # some minutes from the database's rows, the current one from Redis
    client.enqueue("examples.echo", {"i": 9})
    run_worker(r, ["examples.echo"])
    every = {s.task: s for s in Series("hour").tasks()}
    assert every["examples.fail"].failed and every["examples.fail"].retried and every["examples.echo"].completed
    for task in ("examples.echo", "examples.fail"):
        assert Series("hour", task=task).tasks() == [every[task]]
    assert Series("hour", task="nothing.ran").tasks() == []
