"""Worker roles (Jobbers' idea): a named set of queues, so a deployment says "the emails role serves emails and
digests" in one place and `runworker --role emails` reads its queues from there."""

import json
from collections.abc import Iterable
from typing import cast

import redis

from jobconsole.core import keys
from jobconsole.core.errors import InvalidJob


class Roles:
    """The roles and their queues, kept in one Redis hash (role -> JSON list of queue names)."""

    def __init__(self, connection: "redis.Redis") -> None:
        self.redis = connection

    def queues(self, role: str) -> list[str]:
        """The queues of a role, sorted; [] for a role nobody set."""
        raw = cast(str | None, self.redis.hget(keys.ROLES, role))
        return sorted(_decode(raw))

    def set_queues(self, role: str, queues: Iterable[str]) -> list[str]:
        """Replace the role's queues (an empty set removes the role); the queues are registered like any queue
        a job used, so the console and `GET /queues` list them before their first job. Raises InvalidJob."""
        check_name(role, "role")
        chosen = sorted(set(queues))
        for queue in chosen:
            check_name(queue, "queue")
        pipe = self.redis.pipeline(transaction=True)
        if chosen:
            pipe.hset(keys.ROLES, role, json.dumps(chosen))
            pipe.sadd(keys.QUEUES, *chosen)
        else:
            pipe.hdel(keys.ROLES, role)
        pipe.execute()
        return chosen

    def all(self) -> dict[str, list[str]]:
        """Every role with its queues, by role name."""
        raw = cast(dict[str, str], self.redis.hgetall(keys.ROLES))
        return {role: sorted(_decode(value)) for role, value in sorted(raw.items())}


def check_name(value: object, what: str) -> str:
    if not isinstance(value, str) or not keys.NAME_PATTERN.match(value):
        raise InvalidJob(f"invalid {what} name {value!r} (letters, digits, '_.-', at most 100)")
    return value


def _decode(raw: str | None) -> list[str]:
    """A stored queue list; [] for one written by other hands that is not a JSON list of names."""
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    return [q for q in value if isinstance(q, str)] if isinstance(value, list) else []
