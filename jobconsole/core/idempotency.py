"""Idempotency records in Redis: a caller's key reserved while its request runs, then what the request answered,
kept for a while, so a retry with the same key gets the first answer instead of a second effect. The HTTP API's
`Idempotency-Key` (jobconsole_api/v1/idempotency.py) decides what a record holds; this only keeps it."""

import hashlib
from typing import cast

import redis

from jobconsole.core import keys


class IdempotencyRecords:
    def __init__(self, connection: "redis.Redis") -> None:
        self.redis = connection

    @staticmethod
    def _name(scope: str, key: str) -> str:
        return keys.idempotency_key(scope, hashlib.sha256(key.encode()).hexdigest())

    def reserve(self, scope: str, key: str, record: str, ttl_s: int) -> tuple[bool, str | None]:
        """Reserve the key with `record` (SET NX) unless it is held: (True, None) when reserved now, else (False,
        the held record; None if it expired in between)."""
        name = self._name(scope, key)
        if self.redis.set(name, record, nx=True, ex=ttl_s):
            return True, None
        return False, cast(str | None, self.redis.get(name))

    def keep(self, scope: str, key: str, record: str, ttl_s: int) -> None:
        """Replace the reservation with the request's outcome, kept `ttl_s` seconds."""
        self.redis.set(self._name(scope, key), record, ex=ttl_s)

    def release(self, scope: str, key: str) -> None:
        """Forget the key (its request failed without an answer worth replaying): a retry runs for real."""
        self.redis.delete(self._name(scope, key))
