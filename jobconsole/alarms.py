"""Silencing an alarm (issue 30): an operator acknowledges a known problem for a time (1 h, 4 h, a day) or until
it clears, with a reason, so that it stops shouting red. A silenced alarm is still shown, as silenced, with who,
why and until when; it counts toward no level (the overview, /runqueue/health) until the silence ends, and then
comes back by itself if the problem is still there. Silences live in the database (`AlarmSilence`), audited as
`silence_alarm` and `lift_silence`.

An alarm is a health reason (health.py) named by its rule, queue and task: `delay:emails:`,
`failure_rate:emails:myapp.send`; or a degraded finding of the service's mirror or workers (service_health.py):
`service:workers:emails`, `service:mirror:`. A silence "until resolved" ends the first time a check of its kind
finds its alarm gone; one for a time ends at its time."""

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from django.db import Error as DatabaseError  # InterfaceError too: a dropped connection
from django.utils import timezone

from jobconsole import audit
from jobconsole.controls import REASON_MAX, Actor, ControlError
from jobconsole.models import AlarmSilence

if TYPE_CHECKING:
    from jobconsole.health import Reason
    from jobconsole.service_health import Finding

log = logging.getLogger("jobconsole.alarms")

# The lengths an operator picks from, by the name a form or a body sends; None: until the alarm clears.
DURATIONS: dict[str, timedelta | None] = {
    "1h": timedelta(hours=1),
    "4h": timedelta(hours=4),
    "1d": timedelta(days=1),
    "resolved": None,
}
DURATION_LABELS = {"1h": "1 hour", "4h": "4 hours", "1d": "1 day", "resolved": "until it clears"}


SERVICE = "service:"  # the keys of the service's findings
# rule:queue:task or service:component:subject; the API's schema too, so written to read the same in Python and
# in ECMAScript (no \s, whose sets differ); no NUL, which PostgreSQL's text refuses.
ALARM_PATTERN = r"^[^:\x00]+:[^:\x00]*:[^\x00]*$"
REASON_PATTERN = r"[^ \t\n\r]"  # some text besides spaces
ALARM_MAX = 300


def key_of(reason: "Reason") -> str:
    """The alarm a health reason raises: its rule, queue and task (a level change keeps the same alarm)."""
    return f"{reason.rule}:{reason.queue}:{reason.task or ''}"


def finding_key(finding: "Finding") -> str:
    """The alarm a service finding raises: its component and subject (the queue of a workers finding)."""
    return f"{SERVICE}{finding.component}:{finding.subject}"


@dataclass(frozen=True, slots=True)
class Silenced:
    """An alarm that is there, silenced: a health `Reason` or a service `Finding`."""

    reason: Any
    silence: AlarmSilence

    @property
    def key(self) -> str:
        return self.silence.key

    @property
    def message(self) -> str:
        if hasattr(self.reason, "message"):
            return str(self.reason.message)
        return f"{self.reason.label}: {self.reason.reason}"  # a service finding, named by its component

    @property
    def level(self) -> str:
        """red or yellow, as the alarm would shout."""
        level = getattr(self.reason, "level", None)
        return str(level.label if level is not None else self.reason.severity.level.label)


def active(now: datetime | None = None) -> dict[str, AlarmSilence]:
    """The silences in force now, by alarm key (the newest, should two be)."""
    now = now or timezone.now()
    rows = AlarmSilence.objects.filter(ended_at__isnull=True).exclude(until__lte=now).order_by("created_at")
    return {row.key: row for row in rows}


def split[T](
    reasons: Iterable[T],
    now: datetime | None = None,
    *,
    key: Callable[[T], str] | None = None,
    service: bool = False,
    resolve: bool = True,
) -> tuple[list[T], list[Silenced]]:
    """The alarms that shout and the silenced ones (health reasons, or with `service` the service's findings and
        `key` finding_key); a silence until resolved of that kind whose alarm is gone ends now. With the database
        away, every alarm shouts (a health check must not fail for want of its silences). `resolve=False`: a check of
    part of the queues, which ends no silence."""
    reasons = list(reasons)
    name_of = key if key is not None else cast(Callable[[T], str], key_of)  # health reasons by default
    try:
        silences = {k: s for k, s in active(now).items() if k.startswith(SERVICE) == service}
        present = {name_of(r) for r in reasons}
        cleared = [s.pk for name, s in silences.items() if resolve and s.until is None and name not in present]
        if cleared:
            AlarmSilence.objects.filter(pk__in=cleared, ended_at__isnull=True).update(
                ended_at=timezone.now(), ended_why="the alarm cleared"
            )
    except DatabaseError as exc:
        log.warning("alarm silences unreadable (%s): every alarm shows", exc)
        return reasons, []
    loud = [r for r in reasons if name_of(r) not in silences]
    quiet = [Silenced(r, silences[name_of(r)]) for r in reasons if name_of(r) in silences]
    return loud, quiet


def silence(user: Actor, key: str, duration: str, reason: str, *, label: str = "") -> AlarmSilence:
    """Silence the alarm `key` for `duration` (DURATIONS) with a reason; replaces a silence already in force."""
    if duration not in DURATIONS:
        raise ControlError(f"Unknown length {duration[:40]!r}: choose {', '.join(DURATIONS)}.")
    reason = reason.strip(" \t\n\r")
    if not reason:
        raise ControlError("Say why the alarm is silenced: the reason is shown beside it and kept in the audit log.")
    if len(key) > ALARM_MAX or not re.search(ALARM_PATTERN, key):
        raise ControlError(f"Unknown alarm {key[:100]!r}: an alarm is named rule:queue:task or service:part:queue.")
    length = DURATIONS[duration]
    now = timezone.now()
    actor = _actor(user)
    AlarmSilence.objects.filter(key=key, ended_at__isnull=True).update(ended_at=now, ended_why=f"replaced by {actor}")
    row = AlarmSilence.objects.create(
        key=key, label=label[:2000], user=_user(user), actor=actor, reason=reason[:REASON_MAX],
        until=None if length is None else now + length,
    )  # fmt: skip
    until = None if row.until is None else row.until.isoformat()
    detail = {"alarm": key, "for": duration, "until": until}
    audit.record(user, "silence_alarm", count=0, reason=reason[:REASON_MAX], detail=detail)
    return row


def lift(user: Actor, key: str) -> int:
    """End the silences of `key` in force now (the alarm shouts again at once); how many ended."""
    now = timezone.now()
    ended = (
        AlarmSilence.objects.filter(key=key, ended_at__isnull=True)
        .exclude(until__lte=now)
        .update(ended_at=now, ended_why=f"lifted by {_actor(user)}")
    )
    if not ended:
        raise ControlError(f"No silence of {key[:100]!r} is in force.", status=404)
    audit.record(user, "lift_silence", count=0, detail={"alarm": key})
    return ended


def _actor(user: Actor) -> str:
    if isinstance(user, str):
        return user
    if user is not None and user.is_authenticated:
        return user.get_username()
    return "anonymous"


def _user(user: Actor) -> Any:
    """The Django user to link, if any (an API token or the shell has none)."""
    return user if user is not None and not isinstance(user, str) and user.is_authenticated else None
