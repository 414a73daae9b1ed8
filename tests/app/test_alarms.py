"""Silencing an alarm (jobconsole/alarms.py, the console's Alarms page): for a time or until it clears, with a
reason, audited; a silenced alarm shows as silenced with who, why and until, counts toward no level, and comes
back when the silence ends."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobconsole import alarms
from jobconsole.health import Level, check
from jobconsole.models import AlarmSilence, AuditLog
from tests.app.test_console_pages import OPERATE, VIEW, web
from tests.app.test_health import waiting_since
from tests.mirror_fixtures import *  # noqa: F403

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

KEY = "delay:q:"


def test_a_silenced_alarm_stops_shouting_shows_who_and_why_and_comes_back_at_its_end(client, r):
    waiting_since(client, r, "q", 900)  # red: past the 10 min alarm delay
    waiting_since(client, r, "other", 200)  # yellow, not silenced
    assert check(queries=client.queries).level is Level.RED
    viewer = web(*VIEW)
    assert 'name="duration"' not in viewer.get("/alarms/").content.decode()  # no form without the permission
    assert viewer.post("/alarms/silence", {"alarm": KEY, "duration": "1h", "reason": "x"}).status_code == 403
    operator = web(*OPERATE)
    page = operator.get("/alarms/").content.decode()
    assert KEY in page and 'name="duration"' in page
    done = operator.post("/alarms/silence", {"alarm": KEY, "duration": "4h", "reason": "known: deploy backlog",
                                             "label": "Queue q waits"}, follow=True)  # fmt: skip
    assert done.status_code == 200 and "Alarm silenced for 4 hours" in done.content.decode()
    health = check(queries=client.queries)
    assert health.level is Level.YELLOW and [r.queue for r in health.reasons] == ["other"]  # q no longer counts
    [silenced] = health.silenced
    assert silenced.reason.queue == "q" and silenced.silence.actor.startswith("u") and silenced.silence.until
    assert {q.queue: q.level for q in health.queues} == {"other": Level.YELLOW, "q": Level.GREEN}
    overview = operator.get("/").content.decode()
    assert "Silenced: Queue q" in overview and "known: deploy backlog" in overview and "1 silenced" in overview
    record = AuditLog.objects.get(action="silence_alarm")
    assert record.reason == "known: deploy backlog" and record.detail["alarm"] == KEY and record.detail["for"] == "4h"
    # The silence ends at its time: the alarm shouts again by itself.
    AlarmSilence.objects.update(until=timezone.now() - timedelta(seconds=1))
    health = check(queries=client.queries)
    assert health.level is Level.RED and not health.silenced


def test_until_resolved_ends_when_the_alarm_clears_and_a_lift_ends_it_early(client, r):
    job = waiting_since(client, r, "q", 900)
    operator = web(*OPERATE)
    operator.post("/alarms/silence", {"alarm": KEY, "duration": "resolved", "reason": "looking into it"})
    health = check(queries=client.queries)
    assert health.level is Level.GREEN and len(health.silenced) == 1 and health.silenced[0].silence.until is None
    client.delete(job)  # cleared
    assert check(queries=client.queries).level is Level.GREEN
    assert AlarmSilence.objects.get().ended_why == "the alarm cleared"
    waiting_since(client, r, "q", 900)  # the same problem again: it shouts, the silence ended with the last one
    assert check(queries=client.queries).level is Level.RED
    operator.post("/alarms/silence", {"alarm": KEY, "duration": "1d", "reason": "again"})
    assert check(queries=client.queries).level is Level.GREEN
    lifted = operator.post("/alarms/lift", {"alarm": KEY}, follow=True)
    assert lifted.status_code == 200 and "Silence lifted" in lifted.content.decode()
    assert check(queries=client.queries).level is Level.RED
    assert list(AuditLog.objects.order_by("at").values_list("action", flat=True)) == [
        "silence_alarm", "silence_alarm", "lift_silence"]  # fmt: skip


@pytest.mark.parametrize(
    ("url", "form", "status", "message"),
    [
        ("/alarms/silence", {"alarm": KEY, "duration": "1w", "reason": "x"}, 400, "Unknown length"),
        ("/alarms/silence", {"alarm": KEY, "duration": "1h", "reason": "  "}, 400, "Say why"),
        ("/alarms/silence", {"alarm": "nonsense", "duration": "1h", "reason": "x"}, 400, "Unknown alarm"),
        ("/alarms/lift", {"alarm": KEY}, 404, "No silence of"),
    ],
)
def test_bad_input_is_refused_with_a_message_and_changes_nothing(client, r, url, form, status, message):
    waiting_since(client, r, "q", 900)
    response = web(*OPERATE).post(url, form)
    assert response.status_code == status and message in response.content.decode()
    assert not AlarmSilence.objects.exists() and not AuditLog.objects.exists()
    assert check(queries=client.queries).level is Level.RED


def test_without_the_database_every_alarm_shows(client, r, monkeypatch):
    waiting_since(client, r, "q", 900)
    alarms.silence("api:ops", KEY, "1h", "known")

    def broken(now=None):
        from django.db import OperationalError

        raise OperationalError("the database is away")

    monkeypatch.setattr(alarms, "active", broken)
    assert check(queries=client.queries).level is Level.RED


def test_a_workers_finding_is_silenced_until_it_clears_and_a_quiet_worker_is_named(client, r):
    from jobconsole import service_health
    from jobconsole.core.store import Store

    client.enqueue("examples.echo", {}, queue="emails")
    now_ms = client.queries.now_ms()
    Store(r).register_worker("h:1:q", ttl_s=30, now_ms=now_ms, info={
        "host": "h", "queues": "emails", "concurrency": 2, "state": "quiet", "heartbeat_at": now_ms})  # fmt: skip
    [degraded] = service_health.check().problems
    assert degraded.reason == ("queue 'emails' has 1 waiting job and no live worker serves it (1 quiet worker: an "
                               "operator's; resume one on the Workers page).")  # fmt: skip
    operator = web(*OPERATE)
    page = operator.get("/alarms/").content.decode()
    assert "service:workers:emails" in page
    operator.post("/alarms/silence", {"alarm": "service:workers:emails", "duration": "resolved", "reason": "drain"})
    result = service_health.check()
    assert result.severity is service_health.Severity.OK and result.problems == []
    [silenced] = result.silenced
    assert silenced.key == "service:workers:emails" and silenced.level == "yellow"
    overview = operator.get("/").content.decode()
    assert 'id="service-health"' not in overview
    assert "Silenced: Workers: queue &#x27;emails&#x27; has 1 waiting" in overview
    assert service_health.check(service_health.PROBE).silenced == []  # a probe neither applies nor ends them
    Store(r).register_worker("h:1:q", ttl_s=30, now_ms=now_ms, info={"state": "running"})  # resumed: served again
    assert service_health.check().severity is service_health.Severity.OK
    assert AlarmSilence.objects.get().ended_why == "the alarm cleared"
