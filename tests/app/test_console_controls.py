"""The console's controls (issue 30, part 2): quiet, resume and stop workers, one or a host's; edit a queue's
limit and a group's connections and rate. Each needs the operate permission, is audited, and refuses bad input
with a message (4xx) and nothing changed."""

from typing import Any

import pytest
from django.test import override_settings

from jobconsole.core.groups import Group
from jobconsole.models import AuditLog
from tests.app.test_console_pages import OPERATE, VIEW, web
from tests.mirror_fixtures import *  # noqa: F403

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def _register(client: Any, worker_id: str, host: str, *, running: int = 1) -> None:
    now_ms = client.store.time_ms()
    info = {"host": host, "pid": 7, "queues": "examples.echo", "concurrency": 4, "active_threads": 4,
            "started_at": now_ms - 3_600_000, "heartbeat_at": now_ms, "state": "running",
            "current": '[{"id": "j1", "queue": "examples.echo", "task": "examples.echo", "attempt": 1}]' * running
            or "[]", "processed": 3, "failed": 0}  # fmt: skip
    client.store.register_worker(worker_id, ttl_s=60, now_ms=now_ms, info=info)


def _control(client: Any, worker_id: str) -> str:
    return next(w.control for w in client.queries.workers.all() if w.id == worker_id)


def test_workers_show_busy_threads_and_uptime_and_quiet_and_stop_need_operate(client, r):
    _register(client, "h1:7:aaaaaa", "h1")
    _register(client, "h1:8:bbbbbb", "h1", running=0)
    _register(client, "h2:9:cccccc", "h2")
    viewer = web(*VIEW)
    page = viewer.get("/workers/").content.decode()
    assert "1 / 4" in page and "1 h" in page  # busy of concurrency, and uptime
    assert "◑ Quiet" not in page and "Stop all" not in page  # no controls without the permission
    refused = viewer.post("/workers/control", {"worker": "h1:7:aaaaaa", "action": "stop"})
    assert refused.status_code == 403 and _control(client, "h1:7:aaaaaa") == ""
    operator = web(*OPERATE)
    page = operator.get("/workers/").content.decode()
    assert "◑ Quiet" in page and "■ Stop" in page and "Stop all" in page and 'data-confirm="Stop h1:7:aaaaaa?' in page
    assert operator.get("/workers/control").status_code == 405
    done = operator.post("/workers/control", {"worker": "h1:7:aaaaaa", "action": "quiet", "reason": "drain"},
                         follow=True)  # fmt: skip
    assert done.status_code == 200 and "takes no new jobs" in done.content.decode()
    assert _control(client, "h1:7:aaaaaa") == "quiet" and "quiet requested" in done.content.decode()
    operator.post("/workers/control", {"host": "h1", "action": "stop"})
    assert {w.id: w.control for w in client.queries.workers.all()} == {
        "h1:7:aaaaaa": "stop", "h1:8:bbbbbb": "stop", "h2:9:cccccc": ""}  # fmt: skip
    records = list(AuditLog.objects.order_by("at").values_list("action", "reason", "detail", "count"))
    assert records == [
        ("worker_quiet", "drain", {"workers": {"h1:7:aaaaaa": "done"}}, 1),
        ("worker_stop", "", {"workers": {"h1:7:aaaaaa": "done", "h1:8:bbbbbb": "done"}, "host": "h1"}, 2),
    ]


@pytest.mark.parametrize(
    ("form", "status", "message"),
    [
        ({"worker": "h1:7:aaaaaa", "action": "pause"}, 400, "Unknown action &#x27;pause&#x27;"),
        ({"action": "quiet"}, 400, "Name one worker or one host."),
        ({"worker": "gone:1:xxxxxx", "action": "quiet"}, 404, "No live worker"),
        ({"host": "nowhere", "action": "stop"}, 404, "No live worker on host"),
    ],
)
def test_a_bad_worker_control_is_refused_with_its_reason(client, r, form, status, message):
    _register(client, "h1:7:aaaaaa", "h1")
    response = web(*OPERATE).post("/workers/control", form)
    assert response.status_code == status and message in response.content.decode()
    assert "Nothing changed" in response.content.decode()
    assert _control(client, "h1:7:aaaaaa") == "" and not AuditLog.objects.exists()


@override_settings()
def test_limits_are_edited_audited_and_shown_beside_the_settings(client, r, settings):
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "QUEUE_LIMITS": {"examples.echo": 4},
                           "GROUPS": {"payments": {"connections": 2, "requests": [10, "second"]}}}  # fmt: skip
    client.enqueue("examples.echo", {"x": 1})
    client.set_queue_limit("examples.echo", 4)
    client.define_group(Group.parse("payments", {"connections": 2, "requests": [10, "second"]}))
    viewer = web(*VIEW)
    page = viewer.get("/flow/").content.decode()
    assert "Change limits" not in page and "edited" not in page
    assert viewer.post("/flow/limit", {"queue": "examples.echo", "limit": "1"}).status_code == 403
    assert viewer.post("/flow/group", {"group": "payments", "connections": "9"}).status_code == 403
    operator = web(*OPERATE)
    assert "Change limits" in operator.get("/flow/").content.decode()
    done = operator.post("/flow/limit", {"queue": "examples.echo", "limit": "6", "reason": "more room"}, follow=True)
    assert done.status_code == 200 and "at most 6 running at once" in done.content.decode()
    assert client.queries.queues.flow_control().queue_limits == {"examples.echo": 6}
    flow = done.context["limits"]
    assert flow == [{"queue": "examples.echo", "limit": 6, "running": 0, "full": False, "settings": 4,
                     "changed": True}]  # fmt: skip
    operator.post("/flow/group", {"group": "payments", "connections": "5", "requests": "100", "per": "1",
                                  "unit": "minute"})  # fmt: skip
    [group] = client.queries.queues.flow_control().groups
    assert (group.connections, group.requests, group.period_ms) == (5, 100, 60_000)
    page = operator.get("/flow/").content.decode()
    assert "100 a minute" in page and "2 at once, 10 a second" in page  # the live value and the settings' value
    operator.post("/flow/limit", {"queue": "examples.echo", "limit": "6", "lift": "1"})  # the Lift button
    assert client.queries.queues.flow_control().queue_limits == {}
    assert "lifted at run time" in operator.get("/flow/").content.decode()
    records = list(AuditLog.objects.order_by("at").values_list("action", "queue", "detail", "reason"))
    assert records == [
        ("set_queue_limit", "examples.echo", {"limit": 6}, "more room"),
        ("define_group", "", {"group": "payments", "connections": 5, "requests": [100, 1, "minute"]}, ""),
        ("set_queue_limit", "examples.echo", {"limit": None}, ""),
    ]


@pytest.mark.parametrize(
    ("url", "form", "status", "message"),
    [
        ("/flow/limit", {"queue": "examples.echo", "limit": "0"}, 400, "at least 1, got 0."),
        ("/flow/limit", {"queue": "examples.echo", "limit": "three"}, 400, "must be a whole number"),
        ("/flow/limit", {"queue": "examples.echo", "limit": "-2"}, 400, "must be a whole number"),
        ("/flow/limit", {"queue": "nosuch", "limit": "2"}, 404, "No queue &#x27;nosuch&#x27;"),
        ("/flow/group", {"group": "payments", "connections": "-1"}, 400, "Connections must be a whole number"),
        ("/flow/group", {"group": "payments", "connections": "0"}, 400, "give connections (at least 1), a rate"),
        (
            "/flow/group",
            {"group": "payments", "connections": "2", "requests": "5", "unit": "day"},
            400,
            "second, minute or hour",
        ),
        ("/flow/group", {"group": "nosuch", "connections": "2"}, 404, "No concurrency group"),
    ],
)
def test_a_bad_limit_changes_nothing_and_says_why(client, r, url, form, status, message):
    client.enqueue("examples.echo", {"x": 1})
    client.set_queue_limit("examples.echo", 4)
    client.define_group(Group("payments", connections=2))
    response = web(*OPERATE).post(url, form)
    text = response.content.decode()
    assert response.status_code == status and message in text and "Nothing changed" in text, text[-3000:]
    flow = client.queries.queues.flow_control()
    assert flow.queue_limits == {"examples.echo": 4} and [(g.name, g.connections) for g in flow.groups] == [
        ("payments", 2)]  # fmt: skip
    assert not AuditLog.objects.exists()


def test_a_queue_served_only_by_quiet_workers_shows_no_workers(client, r):
    client.enqueue("examples.echo", {"x": 1})
    _register(client, "h1:7:aaaaaa", "h1", running=0)
    client.control_workers(["h1:7:aaaaaa"], "quiet")
    client.store.register_worker("h1:7:aaaaaa", ttl_s=60, now_ms=client.store.time_ms(), info={"state": "quiet"})
    page = web(*VIEW).get("/queues/").content.decode()
    assert "no workers" in page and "1 quiet" in page
