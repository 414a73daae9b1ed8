"""Silencing an alarm (issue 30): an operator acknowledges a known problem for a time (1 h, 4 h, a day) or until
it clears, with a reason, so that it stops shouting red. A silenced alarm is still shown, as silenced, with who,
why and until when; it counts toward no level (the overview, /runqueue/health) until the silence ends, and then
comes back by itself if the problem is still there. Silences live in the database (`AlarmSilence`), audited as
`silence_alarm` and `lift_silence`.

An alarm is a health reason (health.py) named by its rule, queue and task: `delay:emails:`,
`failure_rate:emails:myapp.send`. A silence "until resolved" ends the first time a health check finds its alarm
gone; one for a time ends at its time."""

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import Error as DatabaseError  # InterfaceError too: a dropped connection
from django.utils import timezone

from jobconsole import audit
from jobconsole.controls import REASON_MAX, Actor, ControlError
from jobconsole.models import AlarmSilence

if TYPE_CHECKING:
    from jobconsole.health import Reason

log = logging.getLogger("jobconsole.alarms")

# The lengths an operator picks from, by the name a form or a body sends; None: until the alarm clears.
DURATIONS: dict[str, timedelta | None] = {
    "1h": timedelta(hours=1),
    "4h": timedelta(hours=4),
    "1d": timedelta(days=1),
    "resolved": None,
}
DURATION_LABELS = {"1h": "1 hour", "4h": "4 hours", "1d": "1 day", "resolved": "until it clears"}


def key_of(reason: "Reason") -> str:
    """The alarm a health reason raises: its rule, queue and task (a level change keeps the same alarm)."""
    return f"{reason.rule}:{reason.queue}:{reason.task or ''}"


@dataclass(frozen=True, slots=True)
class Silenced:
    """An alarm that is there, silenced."""

    reason: "Reason"
    silence: AlarmSilence

    @property
    def key(self) -> str:
        return self.silence.key


def active(now: datetime | None = None) -> dict[str, AlarmSilence]:
    """The silences in force now, by alarm key (the newest, should two be)."""
    now = now or timezone.now()
    rows = AlarmSilence.objects.filter(ended_at__isnull=True).exclude(until__lte=now).order_by("created_at")
    return {row.key: row for row in rows}


def split(reasons: Iterable["Reason"], now: datetime | None = None) -> tuple[list["Reason"], list[Silenced]]:
    """The reasons that shout and the silenced ones; a silence until resolved whose alarm is gone ends now. With
    the database away, every reason shouts (a health check must not fail for want of its silences)."""
    reasons = list(reasons)
    try:
        silences = active(now)
        present = {key_of(r) for r in reasons}
        cleared = [s.pk for key, s in silences.items() if s.until is None and key not in present]
        if cleared:
            AlarmSilence.objects.filter(pk__in=cleared, ended_at__isnull=True).update(
                ended_at=timezone.now(), ended_why="the alarm cleared"
            )
    except DatabaseError as exc:
        log.warning("alarm silences unreadable (%s): every alarm shows", exc)
        return reasons, []
    loud = [r for r in reasons if key_of(r) not in silences]
    quiet = [Silenced(r, silences[key_of(r)]) for r in reasons if key_of(r) in silences]
    return loud, quiet


def silence(user: Actor, key: str, duration: str, reason: str, *, label: str = "") -> AlarmSilence:
    """Silence the alarm `key` for `duration` (DURATIONS) with a reason; replaces a silence already in force."""
    if duration not in DURATIONS:
        raise ControlError(f"Unknown length {duration[:40]!r}: choose {', '.join(DURATIONS)}.")
    reason = reason.strip()
    if not reason:
        raise ControlError("Say why the alarm is silenced: the reason is shown beside it and kept in the audit log.")
    key = key.strip()
    if not key or len(key) > 300 or key.count(":") < 2:
        raise ControlError(f"Unknown alarm {key[:100]!r}.")
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
