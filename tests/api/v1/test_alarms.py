"""/api/v1 alarms: list them, silence one (audited) so it counts toward no level, lift the silence."""

from typing import Any

import pytest

from jobconsole.models import AlarmSilence, AuditLog
from tests.api.v1.conftest import Api, problem
from tests.app.test_health import waiting_since

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def test_silence_and_lift_an_alarm(operator: Api, client: Any, r: Any) -> None:
    waiting_since(client, r, "q", 900)
    listed = operator.get("/alarms").json()
    assert listed["level"] == "red" and listed["service"] == "degraded"  # and no worker serves q
    assert [a["alarm"] for a in listed["items"]] == ["delay:q:", "service:workers:q"]
    [alarm, _] = listed["items"]
    assert (alarm["alarm"], alarm["level"], alarm["silenced"]) == ("delay:q:", "red", None)
    done = operator.post("/alarms/silence", {"alarm": "delay:q:", "for": "4h", "reason": "known backlog"})
    assert done.status_code == 200, done.content
    body = done.json()
    assert body["level"] == "green"
    [alarm, _] = body["items"]
    assert alarm["silenced"]["actor"] == "api:ops" and alarm["silenced"]["reason"] == "known backlog"
    assert alarm["silenced"]["until"].endswith("Z")
    lifted = operator.post("/alarms/lift", {"alarm": "delay:q:"}).json()
    assert lifted["level"] == "red" and lifted["items"][0]["silenced"] is None
    assert list(AuditLog.objects.order_by("at").values_list("actor", "action")) == [
        ("api:ops", "silence_alarm"), ("api:ops", "lift_silence")]  # fmt: skip


def test_bad_silences_are_refused_and_change_nothing(operator: Api, client: Any, r: Any) -> None:
    waiting_since(client, r, "q", 900)
    problem(operator.post("/alarms/silence", {"alarm": "delay:q:", "for": "1w", "reason": "x"}), 422)
    problem(operator.post("/alarms/silence", {"alarm": "delay:q:", "for": "1h", "reason": ""}), 422)
    problem(operator.post("/alarms/silence", {"alarm": "delay:q:", "for": "1h", "reason": " "}), 422)
    problem(operator.post("/alarms/silence", {"alarm": "x", "for": "1h", "reason": "y"}), 422)  # not rule:queue:task
    problem(operator.post("/alarms/lift", {"alarm": "delay:q:"}), 404)
    assert not AlarmSilence.objects.exists() and not AuditLog.objects.exists()
