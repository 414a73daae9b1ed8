"""The console's overview, queues, dead letters, workers and audit pages: what they show, who may act, and
bad input answered with a message instead of an error."""

import csv
import io
import json
import time
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client as WebClient

from dashboards.views.assets import VERSION as PLOTLY_VERSION
from jobconsole.core import task
from jobconsole.models import AuditLog, DeadLetter
from tests.helpers import claim
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

VIEW = ["view_job", "view_deadletter", "view_queue", "view_auditlog"]
OPERATE = [*VIEW, "operate_job", "operate_deadletter", "operate_queue"]
PURGE = [*OPERATE, "purge_job", "purge_deadletter"]


def web(*codenames: str, staff: bool = True) -> WebClient:
    user = User.objects.create_user(f"u{User.objects.count()}", password="pw", is_staff=staff)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="jobconsole", codename__in=codenames))
    browser = WebClient()
    browser.force_login(user)
    return browser


def make_dead(client: Any, mirror: Any, r: Any, messages: list[str]) -> list[str]:
    ids = [client.enqueue("examples.fail", {"message": m}, max_retries=0).id for m in messages]
    run_worker(r, ["examples.fail"])
    mirror.drain()
    return ids


def test_pages_need_a_login_and_the_view_permission(engine_settings):
    anonymous = WebClient()
    for url in ("/", "/queues/", "/dead/", "/workers/", "/audit/"):
        assert anonymous.get(url).status_code == 302, url  # to the login page
    nobody = web(staff=False)
    assert nobody.get("/").status_code == 403
    staff_without_the_permission = web()  # the admin would show such an account nothing either
    assert staff_without_the_permission.get("/").status_code == 403
    assert web("view_job", staff=False).get("/").status_code == 200


def test_overview_and_queue_pages_show_counts_and_the_no_workers_badge(client, r):
    client.enqueue("examples.echo", {"x": 1})
    client.enqueue("examples.echo", {"x": 2}, delay=600)
    browser = web(*VIEW)
    page = browser.get("/")
    text = page.content.decode()
    assert page.status_code == 200 and "examples.echo" in text and "no workers" in text
    assert page["Content-Security-Policy"].startswith("default-src 'self'") and page["X-Frame-Options"] == "DENY"
    partial = browser.get("/", headers={"HX-Request": "true"})
    assert b"<html" not in partial.content and b"examples.echo" in partial.content
    detail = browser.get("/queues/examples.echo/", {"state": "scheduled"})
    assert detail.status_code == 200 and len(detail.context["page"].jobs) == 1
    assert browser.get("/queues/nope/").status_code == 404
    odd = browser.get("/queues/examples.echo/", {"state": "exploded", "cursor": "!!"})
    assert odd.status_code == 200 and "Unknown state" in odd.content.decode()


@task(name="tests.retry_later", queue="tests.retry_later", max_retries=3, retry_delay=600)
def retry_later() -> None:
    raise RuntimeError("down for maintenance")


def test_queued_is_named_apart_from_waiting_on_dependencies_and_a_paused_queue_does_not_drain(client, r):
    for i in range(4):
        client.enqueue("examples.echo", {"i": i})
    run_worker(r, ["examples.echo"])  # a throughput, so the overview has a drain estimate to give
    parent = client.enqueue("examples.echo", {"i": "parent"}, delay=600)
    client.enqueue("examples.echo", {"i": "child"}, depends_on=[parent])
    client.enqueue("examples.echo", {"i": "ready"})
    browser = web(*VIEW)
    overview = browser.get("/")
    text = overview.content.decode()
    totals = overview.context["totals"]
    assert totals["queued"] == 1 and totals["waiting"] == 1
    # "Waiting" was the queued jobs, which clashed with the `waiting` state: the tile and columns say Queued.
    assert '<div class="label">Queued</div>' in text and '<div class="label">Waiting</div>' not in text
    assert '<th class="num">Queued</th><th>Oldest queued</th>' in text and "1 waiting on dependencies" in text
    [row] = [q for q in overview.context["queues"] if q.name == "examples.echo"]
    assert row.extra["rate"] is not None and row.extra["rate"].drain_seconds  # it drains while active
    queue = browser.get("/queues/examples.echo/").content.decode()
    assert '<div class="label">Queued</div>' in queue
    assert '<a href="?state=waiting">1 waiting on dependencies</a>' in queue
    # Its tab, the same words, with its count.
    assert '<a href="?state=waiting">waiting on dependencies <span class="tab-count">1</span></a>' in queue
    assert '<th class="num">Queued</th>' in browser.get("/queues/").content.decode()

    assert "paused" not in drain_cell(text, "examples.echo")

    web(*OPERATE).post("/queues/examples.echo/pause", {"action": "pause"})
    drain = drain_cell(browser.get("/").content.decode(), "examples.echo")
    assert drain.endswith(">paused</span>") and " s" not in drain  # "paused", not "drains in 13 s"


def drain_cell(overview: str, queue: str) -> str:
    """The "Drains in" cell of a queue's row on the overview (its 9th)."""
    row = overview.split(f'href="/queues/{queue}/"')[1].split("</tr>")[0]
    return row.split("<td")[8].split("</td>")[0]


def test_overview_counts_retrying_jobs_apart_from_delayed_ones(client, mirror, r):
    client.enqueue("tests.retry_later", delay=600)  # delayed, not retrying
    retrying = client.enqueue("tests.retry_later").id
    run_worker(r, ["tests.retry_later"])
    assert client.get(retrying, history=False).state.value == "retrying"
    mirror.drain()
    page = web(*VIEW).get("/")
    row = next(q for q in page.context["queues"] if q.name == "tests.retry_later")
    assert (row.counts.scheduled, row.extra["retrying"], page.context["totals"]["retrying"]) == (2, 1, 1)
    assert "?queue=tests.retry_later&amp;state=retrying" in page.content.decode()
    # The queue's tabs count them apart too (Redis holds both in one set; the mirror tells the retrying ones).
    queue = web(*VIEW).get("/queues/tests.retry_later/", {"state": "retrying"})
    counts = {state: jobs for state, _, jobs in queue.context["tabs"]}
    assert (counts["scheduled"], counts["retrying"], counts["queued"], counts["completed"]) == (1, 1, 0, 0)
    assert "1 shown of 1" in queue.content.decode()


def test_queue_pages_cursor_walks_every_job_once(client):
    ids = {client.enqueue("examples.echo", {"i": i}).id for i in range(120)}
    browser, seen, cursor = web(*VIEW), [], ""
    while True:
        page = browser.get("/queues/examples.echo/", {"state": "queued", **({"cursor": cursor} if cursor else {})})
        seen += [job.id for job in page.context["page"].jobs]
        cursor = page.context["page"].next_cursor
        if not cursor:
            break
    assert len(seen) == len(set(seen)) == 120 and set(seen) == ids


def test_pause_and_resume_need_the_operate_permission_and_are_audited(client, r):
    client.enqueue("examples.echo", {"x": 1})
    viewer = web(*VIEW)
    assert "Pause queue" not in viewer.get("/queues/examples.echo/").content.decode()
    refused = viewer.post(
        "/queues/examples.echo/pause", {"action": "pause"}, headers={"Referer": "http://testserver/queues/"}
    )
    assert refused.status_code == 403 and not client.queries.queues.is_paused("examples.echo")
    page = refused.content.decode()  # the console's refusal page, with the reason and a way back
    assert "Not allowed" in page and "pause" in page and 'href="http://testserver/queues/"' in page
    assert 'aria-current="page"' not in page and 'href="/queues/"' in page  # the console's navigation
    elsewhere = viewer.post(
        "/queues/examples.echo/pause", {"action": "pause"}, headers={"Referer": "https://evil.test/"}
    )
    assert "evil.test" not in elsewhere.content.decode()
    operator = web(*OPERATE)
    assert operator.get("/queues/examples.echo/pause").status_code == 405  # a GET never changes anything
    response = operator.post("/queues/examples.echo/pause", {"action": "pause", "reason": "deploy"}, follow=True)
    assert response.status_code == 200 and "paused" in response.content.decode()
    assert client.queries.queues.is_paused("examples.echo")
    assert run_worker(r, ["examples.echo"]) == 0  # a paused queue is not worked
    operator.post("/queues/examples.echo/pause", {"action": "resume"})
    assert not client.queries.queues.is_paused("examples.echo")
    records = list(AuditLog.objects.order_by("at").values_list("action", "queue", "reason"))
    assert records == [("pause", "examples.echo", "deploy"), ("resume", "examples.echo", "")]


def test_dead_letters_group_by_cause_filter_and_escape(client, mirror, r):
    make_dead(client, mirror, r, ["<script>alert(1)</script>", "boom", "boom"])
    browser = web(*VIEW)
    page = browser.get("/dead/")
    text = page.content.decode()
    assert page.status_code == 200
    [group] = page.context["groups"]  # one exception class and top frame: one cause
    assert group["count"] == 3 and group["error_class"] == "jobconsole.examples.ExampleFailure"
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert len(browser.get("/dead/", {"q": "boom"}).context["letters"]) == 2
    assert len(browser.get("/dead/", {"fingerprint": group["fingerprint"]}).context["letters"]) == 3
    assert len(browser.get("/dead/", {"status": "resubmitted"}).context["letters"]) == 0
    bad = browser.get("/dead/", {"version": "two", "since": "yesterday", "status": "zombie"})
    assert bad.status_code == 400 and len(bad.context["filters"].errors) == 3
    assert "letters" not in bad.context  # nothing listed: never "everything" for a filter that could not be read
    stale = browser.get("/dead/", {"cursor": "x"})
    assert stale.status_code == 200 and stale.context["bad_cursor"] and len(stale.context["letters"]) == 3


def test_dead_letter_export_streams_what_the_filter_matches(client, mirror, r):
    make_dead(client, mirror, r, ["one", "two", "two"])
    browser = web(*VIEW)
    response = browser.get("/dead/export.csv", {"q": "two"})
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert response["Content-Type"].startswith("text/csv") and len(rows) == 2
    assert {row["message"] for row in rows} == {"two"} and rows[0]["task"] == "examples.fail"
    exported = json.loads(b"".join(browser.get("/dead/export.json").streaming_content))
    assert len(exported) == 3 and {e["job_id"] for e in exported} == set(
        DeadLetter.objects.values_list("job_id", flat=True)
    )
    assert browser.get("/dead/export.json", {"since": "not a date"}).status_code == 400
    assert browser.get("/dead/export.json", {"since": "0001-01-01T00:00+05:00"}).status_code == 400
    assert browser.get("/dead/export.xml").status_code == 404


def test_workers_page_shows_live_silent_and_gone_workers_with_their_jobs(client, r):
    job = client.enqueue("examples.sleep", {"seconds": 5})
    orphan = client.enqueue("examples.sleep", {"seconds": 5})
    store = client.store
    now_ms = store.time_ms()
    info = {"host": "web-1", "pid": 4242, "queues": "examples.sleep", "concurrency": 4, "active_threads": 0,
            "started_at": now_ms - 60_000, "heartbeat_at": now_ms, "state": "running", "current": "[]",
            "processed": 17, "failed": 2}  # fmt: skip
    store.register_worker("live-worker", ttl_s=30, now_ms=now_ms, info=info)
    # A worker that stopped heartbeating 20 s ago while holding the job (its entry has not expired yet).
    old = now_ms - 20_000
    [lease] = claim(r, "examples.sleep", 1, worker="silent-worker")
    assert lease.id == job.id
    store.register_worker("silent-worker", ttl_s=30, now_ms=old, info={**info, "heartbeat_at": old})
    # A worker whose registry entry expired (it died long enough ago), its job still leased to it.
    [lease] = claim(r, "examples.sleep", 1, worker="gone-worker")
    assert lease.id == orphan.id
    store.register_worker("gone-worker", ttl_s=1, now_ms=old, info={**info, "heartbeat_at": old})
    time.sleep(1.2)
    page = web(*VIEW).get("/workers/")
    rows = {row.info.id: row for row in page.context["rows"]}
    assert rows["live-worker"].status == "running" and rows["silent-worker"].status == "silent"
    assert [j["id"] for j in rows["silent-worker"].jobs] == [job.id]
    assert rows["gone-worker"].status == "gone" and [j["id"] for j in rows["gone-worker"].jobs] == [orphan.id]
    assert page.context["live"] == 1 and page.context["lost"] == 2
    html = page.content.decode()
    assert "not heartbeating" in html and "✕ gone" in html and "web-1" in html and orphan.id in html


def test_a_worker_declared_gone_keeps_its_record_with_when_and_why(client, r):
    from jobconsole.core.lapse import LapseWatch

    client.enqueue("examples.sleep", {"seconds": 5})
    store = client.store
    info = {"host": "web-9", "pid": 9191, "queues": "examples.sleep", "concurrency": 4, "state": "running",
            "current": "[]", "processed": 1234, "failed": 5, "started_at": store.time_ms()}  # fmt: skip
    store.register_worker("lost-worker", ttl_s=30, now_ms=store.time_ms(), info=info)
    store.worker_beat("lost-worker", expiry_ms=300)
    claim(r, "examples.sleep", 1, worker="lost-worker")
    time.sleep(0.4)
    assert LapseWatch(store, client.queries, ttl_ms=1000).step() == 1
    page = web(*VIEW).get("/workers/")
    [row] = page.context["rows"]
    assert row.status == "gone" and row.info.jobs_taken_back == 1 and row.jobs == []
    html = page.content.decode()
    assert "✕ gone" in html and "web-9" in html and "9191" in html and "1,234" in html and "examples.sleep" in html
    assert "no heartbeat for 0." in html and "1 job taken back" in html


def test_audit_log_filters_and_pages(engine_settings):
    for i in range(60):
        AuditLog.objects.create(actor="alice" if i % 2 else "bob", action="retry", count=i)
    browser = web(*VIEW)
    first = browser.get("/audit/", {"actor": "alice"})
    assert len(first.context["records"]) == 30 and first.context["next_cursor"] is None
    everything = browser.get("/audit/")
    second = browser.get("/audit/", {"cursor": everything.context["next_cursor"]})
    ids = [r.pk for r in everything.context["records"]] + [r.pk for r in second.context["records"]]
    assert len(ids) == len(set(ids)) == 60
    bad = browser.get("/audit/", {"action": "nuke", "since": "31/12/2026"})
    assert bad.status_code == 400 and len(bad.context["filters"].errors) == 2 and bad.context["records"] == []


def test_operator_time_zone_from_the_cookie(client):
    client.enqueue("examples.echo", {"x": 1}, delay=600)
    browser = web(*VIEW)
    browser.cookies["jc_tz"] = "Asia/Tokyo"
    assert "JST" in browser.get("/queues/examples.echo/", {"state": "scheduled"}).content.decode()
    browser.cookies["jc_tz"] = "Mars/Olympus"  # unknown zones fall back to the site's
    assert browser.get("/queues/examples.echo/", {"state": "scheduled"}).status_code == 200


def test_overview_charts_and_tasks_pages_show_what_the_workers_counted(client, r):
    for i in range(5):
        client.enqueue("examples.echo", {"i": i})
    client.enqueue("examples.fail", {"message": "nope"}, max_retries=0)
    run_worker(r, ["examples.echo", "examples.fail"])
    web(*OPERATE).post("/queues/examples.echo/pause", {"action": "pause", "reason": "deploy"})
    browser = web(*VIEW)
    page = browser.get("/", {"range": "hour"})
    figures = page.context["figures"]
    completed = figures["throughput"]["data"][0]
    assert completed["name"] == "completed" and sum(completed["y"]) > 0
    assert figures["run"] is not None and figures["wait"] is not None
    for name in ("throughput", "wait", "run"):  # the operator's pause is marked where it happened on each chart
        [note], [line] = figures[name]["layout"]["annotations"], figures[name]["layout"]["shapes"]
        assert note["text"] == "pause examples.echo" and line["x0"] == note["x"], name
    assert page.context["health"].status in {"green", "yellow", "red"}
    text = page.content.decode()
    assert 'class="chart"' in text and f"assets/plotly-basic-{PLOTLY_VERSION}.min.js" in text
    live = browser.get("/", {"part": "live"}, headers={"HX-Request": "true"})
    assert b"overview-live" in live.content and b"chart-depth" not in live.content
    assert "Unknown range" in browser.get("/", {"range": "year"}).content.decode()
    tasks = {t.task: t for t in browser.get("/tasks/").context["tasks"]}
    assert tasks["examples.echo"].completed == 5 and tasks["examples.echo"].success_rate == 1.0
    assert tasks["examples.fail"].dead == 1 and tasks["examples.fail"].success_rate == 0.0
    detail = browser.get("/tasks/examples.echo/", {"range": "day"})
    assert detail.status_code == 200 and detail.context["figures"]["histogram"] is not None
    assert browser.get("/tasks/no.such.task/").status_code == 404


def test_flow_control_page_shows_groups_their_waiting_jobs_and_queue_limits(client, r):
    from jobconsole.core.groups import Group

    assert "No concurrency group is defined" in web(*VIEW).get("/flow/").content.decode()
    client.define_group(Group("payments", connections=2, requests=10, period_ms=60_000))
    client.set_queue_limit("examples.sleep", 3)
    for _ in range(3):
        client.enqueue("examples.echo", {"x": 1}, group="payments")
    assert claim(r, "examples.echo", 5) == []  # the claim holds them for a slot of the group
    grant = client.store.group_acquire("payments", 1, holder="w", lease_ms=30_000, queue="examples.echo")
    assert len(grant.tokens) == 1
    page = web(*VIEW).get("/flow/")
    [group] = page.context["groups"]
    state = group["state"]
    assert (state.name, state.connections, state.in_use, state.started_in_window) == ("payments", 2, 1, 1)
    assert state.held == {"examples.echo": 3} and group["rate"] == "10 a minute"
    assert page.context["limits"] == [
        {"queue": "examples.sleep", "limit": 3, "running": 0, "full": False, "settings": None, "changed": True}
    ]  # set at run time: not in the settings
    html = page.content.decode()
    assert "1 of 2" in html and "10 a minute" in html and "Flow control" in html
    assert client.counts("examples.echo").queued == 3  # held jobs are waiting jobs


def test_pages_show_the_degraded_banner_while_redis_refuses_writes(client, r):
    """Reading a queue first drains its intake (a write): while Redis refused writes the overview answered 500
    (NOREPLICAS), the very state its health banner is there to explain."""
    client.enqueue("examples.echo", {"x": 1})
    browser = web(*VIEW)
    r.config_set("min-replicas-to-write", 1)  # Redis now refuses every write with NOREPLICAS
    try:
        page = browser.get("/")
        queues = browser.get("/queues/")
        queue = browser.get("/queues/examples.echo/")
    finally:
        r.config_set("min-replicas-to-write", 0)
    text = page.content.decode()
    assert page.status_code == 200 and 'id="service-health"' in text and "Degraded" in text and "NOREPLICAS" in text
    assert "<strong>Redis writes</strong>: Redis refuses writes" in text  # the component named, not its JSON id
    assert "examples.echo" in text
    assert queues.status_code == 200 and queue.status_code == 200
