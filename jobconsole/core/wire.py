"""The engine's hot path to Redis: a batch of commands packed by hiredis in one buffer, sent on a pooled
connection, and the replies read straight back.

redis-py's client spends more time per command than Redis itself on this machine (argument type checks,
per-command callbacks, retry and observability wrappers). The worker's report-and-claim round trip and
every enqueue go through here instead; everything else uses the ordinary client on the same pool, so
timeouts, TLS, authentication and health checks stay redis-py's.
"""

import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import redis
from hiredis import pack_command
from redis.exceptions import ResponseError

type Arg = str | int | float | bytes
type Command = Sequence[Arg]

FLUSH_BYTES = 16_384


class _Held:
    """A connection a thread keeps out of the pool; back to the pool when the thread's locals go."""

    def __init__(self, pool: "redis.ConnectionPool") -> None:
        self.pid = os.getpid()
        self.conn = pool.get_connection()
        weakref.finalize(self, pool.release, self.conn)


class Wire:
    """Pipelined commands over `client`'s connection pool. Thread-safe: each thread keeps one connection
    of the pool for itself (no pool lock, liveness poll and bookkeeping per call), returned when the thread
    ends.

    Connection errors are retried only when the client was built to retry (`connection.connect`); a
    worker's client (`without_retries`) never re-sends, because a claim is not safe to repeat blindly."""

    def __init__(self, client: "redis.Redis") -> None:
        self.pool = client.connection_pool
        retry = self.pool.connection_kwargs.get("retry")
        self._retry = retry if retry is not None and retry.get_retries() > 0 else None
        self._local = threading.local()

    def execute(self, commands: Sequence[Command]) -> list[Any]:
        """Send every command in one write; replies in order, Redis error replies as exception values."""
        if self._retry is None:
            return self._execute_once(commands)
        return self._retry.call_with_retry(lambda: self._execute_once(commands), lambda _error: None)  # type: ignore[no-any-return]

    def _connection(self) -> Any:
        held: _Held | None = getattr(self._local, "held", None)
        if held is None or held.pid != os.getpid():  # none yet, or inherited through fork: not ours to use
            held = self._local.held = _Held(self.pool)
        return held.conn

    def _execute_once(self, commands: Sequence[Command]) -> list[Any]:
        conn = self._connection()
        try:
            # Large batches go out in pieces of about FLUSH_BYTES: Redis runs the first commands while the
            # later ones are still being packed. Small ones go out in one write (a syscall is not cheap).
            pending: list[bytes] = []
            size = 0
            for command in commands:
                # hiredis's stub types the argument as a 1-tuple; it takes any number of arguments.
                packed = pack_command(tuple(command))  # type: ignore[arg-type]
                pending.append(packed)
                size += len(packed)
                if size >= FLUSH_BYTES:
                    conn.send_packed_command([b"".join(pending)])
                    pending, size = [], 0
            if pending:
                conn.send_packed_command([b"".join(pending)])
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(conn.read_response())
                except ResponseError as exc:  # one failed command does not spoil the others' replies
                    replies.append(exc)
            return replies
        except BaseException:
            conn.disconnect()  # a half-read reply stream must never be reused; the next call reconnects
            raise
