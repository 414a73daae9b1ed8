"""Alarms: the health's reasons and the service's degraded mirror and workers findings now, each shouting or
silenced (who, why, until), and silencing one for a time or until it clears, or lifting a silence (audited;
jobconsole/alarms.py)."""

from typing import Any

from django.db import transaction

from jobconsole import alarms, health, service_health
from jobconsole.controls import ControlError
from jobconsole.engine import get_client
from jobconsole.models import AlarmSilence
from jobconsole_api.problems import Problem
from jobconsole_api.v1.common import MAX_REASON
from jobconsole_api.v1.routing import Call, Reply, Response, operation
from jobconsole_api.v1.schema import array, nullable, number, obj, string
from jobconsole_api.v1.shapes import iso

KEY = string(
    "the alarm: rule:queue:task, e.g. delay:emails: or failure_rate:emails:myapp.send",
    pattern=alarms.ALARM_PATTERN,
    maxLength=alarms.ALARM_MAX,
)
SILENCE = obj(
    {"actor": string(), "reason": string(), "since": string(format="date-time"),
     "until": nullable(string(format="date-time", description="null: until the alarm clears"))},
    ("actor", "reason", "since", "until"),
)  # fmt: skip
ALARM = obj(
    {"alarm": KEY, "level": string(enum=["yellow", "red"]), "rule": string(), "queue": string(),
     "task": nullable(string()), "value": number(), "threshold": number(), "message": string(),
     "silenced": nullable(SILENCE)},
    ("alarm", "level", "message", "silenced"),
)  # fmt: skip
ALARMS = obj(
    {"level": string("the queues' health", enum=["green", "yellow", "red"]),
     "service": string("the service's: Redis, the database, the mirror, the workers", enum=["ok", "degraded", "down"]),
     "items": array(ALARM)},
    ("level", "service", "items"),
)  # fmt: skip


def _silence(row: AlarmSilence) -> dict[str, Any]:
    return {"actor": row.actor, "reason": row.reason, "since": iso(row.created_at), "until": iso(row.until)}


def _alarm(reason: health.Reason, silence: AlarmSilence | None) -> dict[str, Any]:
    return {
        "alarm": alarms.key_of(reason), "level": reason.level.label, "rule": reason.rule, "queue": reason.queue,
        "task": reason.task, "value": reason.value, "threshold": reason.threshold, "message": reason.message,
        "silenced": None if silence is None else _silence(silence),
    }  # fmt: skip


def _finding(finding: service_health.Finding, silence: AlarmSilence | None) -> dict[str, Any]:
    return {
        "alarm": alarms.finding_key(finding), "level": finding.severity.level.label, "rule": finding.component,
        "queue": finding.subject, "task": None, "message": f"{finding.label}: {finding.reason}",
        "silenced": None if silence is None else _silence(silence),
    }  # fmt: skip


def _alarms() -> dict[str, Any]:
    state = health.check()
    service = service_health.check(queues=state.queues)
    items = [_alarm(r, None) for r in state.reasons] + [_alarm(s.reason, s.silence) for s in state.silenced]
    items += [
        _finding(f, None)
        for f in service.problems
        if f.component in service_health.SILENCEABLE and f.severity is service_health.Severity.DEGRADED
    ]
    items += [_finding(s.reason, s.silence) for s in service.silenced]
    return {"level": state.status, "service": service.status, "items": items}


@operation(
    "GET", "/alarms", operation_id="list_alarms", summary="Alarms, shouting or silenced", tag="alarms", scope="read",
    responses={200: Response("The health's level (silenced alarms left out) and every alarm now.", ALARMS)},
)  # fmt: skip
def list_alarms(call: Call) -> Reply:
    """Every health reason now (the overview's), the silenced ones with who silenced them, why and until when.
    Not for a limited token (the health spans every queue)."""
    call.caller.check_unlimited()
    return Reply(200, _alarms())


@operation(
    "POST", "/alarms/silence", operation_id="silence_alarm", summary="Silence an alarm", tag="alarms",
    body=obj({"alarm": KEY, "for": string("how long", enum=list(alarms.DURATIONS)),
              "reason": string("why (shown beside the alarm, kept in the audit log)", pattern=alarms.REASON_PATTERN,
                               maxLength=MAX_REASON)}, ("alarm", "for", "reason")),
    responses={200: Response("Every alarm as it is now.", ALARMS), 400: Response("A bad alarm or reason.")},
)  # fmt: skip
def silence_alarm(call: Call) -> Reply:
    """The alarm counts toward no level until the silence ends (at its time, or once the alarm clears), and then
    comes back if the problem is still there. Replaces a silence of the same alarm. Not for a limited token."""
    call.caller.check_unlimited("An alarm's silence changes the health every caller sees")
    body = call.body
    try:
        with transaction.atomic():  # Redis away while the answer is read: 503, and the silence rolled back
            alarms.silence(call.actor, body["alarm"], body["for"], body["reason"])
            return Reply(200, _alarms())
    except ControlError as exc:
        raise Problem(exc.status, str(exc)) from exc


@operation(
    "POST", "/alarms/lift", operation_id="lift_silence", summary="Lift an alarm's silence", tag="alarms",
    body=obj({"alarm": KEY}, ("alarm",)),
    responses={200: Response("Every alarm as it is now.", ALARMS), 404: Response("No silence of it in force.")},
)  # fmt: skip
def lift_silence(call: Call) -> Reply:
    """The alarm counts again at once. Not for a limited token."""
    call.caller.check_unlimited("An alarm's silence changes the health every caller sees")
    get_client().queries.now()  # Redis away: 503 before anything (the answer is the health, read from Redis)
    try:
        with transaction.atomic():
            alarms.lift(call.actor, call.body["alarm"])
            return Reply(200, _alarms())
    except ControlError as exc:
        raise Problem(exc.status, str(exc)) from exc
