"""Mirror leadership: one mirror writes at a time.

An owner-token Redis lock elects the leader; a database fence row (`MirrorLease`) makes that safe: every
transaction the mirror commits first updates the row where the token is still its own, so a deposed leader's
late batch rolls back instead of overwriting rows a newer leader wrote. The same row records the Redis epoch
the database has seen (how the mirror notices that Redis lost writes; see loop.py)."""

import logging
import os
import socket
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from django.db import transaction

from jobconsole.core.maintenance import RETRYABLE_ERRORS
from jobconsole.core.store import Store
from jobconsole.models import MirrorLease

log = logging.getLogger(__name__)

LEASE = "mirror"  # the MirrorLease row's name


class LostLeadership(Exception):
    """Another mirror holds the lock (or the database fence) now; this one must stop writing."""


class Leadership:
    def __init__(self, store: Store, *, lock_ttl: float = 10.0, name: str | None = None) -> None:
        self.store = store
        self.lock_ttl_ms = int(lock_ttl * 1000)
        self.token = uuid.uuid4().hex
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.leader = False
        self.term = 0  # times this process took the lead: each new term starts over from the database
        self.epoch = 0  # the Redis epoch the database last recorded
        self.read_epoch = 0  # the newest epoch read from Redis, recorded by the next fence()
        self._renewed = 0.0

    def lead(self) -> bool:
        """Take or renew the leader lock; on taking it, take over the database fence too."""
        now = time.monotonic()
        if self.leader and now - self._renewed < self.lock_ttl_ms / 3000:
            return True
        if not self.store.acquire_lock("mirror", self.token, self.lock_ttl_ms):
            if self.leader:
                log.warning("mirror=%s lost the leader lock", self.name)
            self.leader = False
            return False
        if not self.leader:
            stamp = datetime.now(UTC)
            with transaction.atomic():
                # On PostgreSQL this waits for a batch the previous leader may still be committing.
                MirrorLease.objects.update_or_create(
                    name=LEASE,
                    defaults={"token": self.token, "holder": self.name, "acquired_at": stamp, "renewed_at": stamp},
                )
            self.epoch = MirrorLease.objects.get(name=LEASE).redis_epoch
            self.term += 1
            self.leader = True
            log.info("mirror=%s is the leader", self.name)
        self._renewed = now
        return True

    def release(self) -> None:
        if self.leader:
            try:
                self.store.release_lock("mirror", self.token)
            except RETRYABLE_ERRORS:
                pass
        self.leader = False

    def fence(self) -> None:
        """Renew the database fence in the current transaction (and record the newest Redis epoch read)."""
        fields: dict[str, Any] = {"renewed_at": datetime.now(UTC)}
        if self.read_epoch > self.epoch:
            fields["redis_epoch"] = self.epoch = self.read_epoch
        updated = MirrorLease.objects.filter(name=LEASE, token=self.token).update(**fields)
        if updated != 1:
            self.leader = False
            raise LostLeadership(f"mirror {self.name}: another mirror took the database fence")

    # --- Redis's epoch (see loop.py) ---------------------------------------------------------------

    def observe(self, epoch: int) -> bool:
        """Note the epoch a read got from Redis; False if it is not past the recorded one (Redis lost writes)."""
        if epoch <= self.epoch:
            return False
        self.read_epoch = epoch
        return True

    def observe_snapshot(self, epoch: int) -> None:
        """Note the epoch a resync's snapshot is as new as (the database records it with the rows)."""
        self.read_epoch = max(self.read_epoch, epoch)

    def next_epoch(self) -> int:
        """An epoch past every one seen, for Redis to move to once a rewind is handled."""
        self.read_epoch = max(self.read_epoch, self.epoch) + 1
        return self.read_epoch
