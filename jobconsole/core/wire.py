"""The engine's hot path to Redis: a batch of commands packed by hiredis in one buffer, sent on a pooled
connection, and the replies read straight back.

redis-py's client spends more time per command than Redis itself on this machine (argument type checks,
per-command callbacks, retry and observability wrappers). The worker's report-and-claim round trip and
every enqueue go through here instead; everything else uses the ordinary client on the same pool, so
timeouts, TLS, authentication and health checks stay redis-py's.

A caller that waits for a short reply (a producer's enqueue) may ask to spin for it: on a VM a thread that
blocks on its socket lets its vCPU halt, and waking it when the reply lands costs more than Redis takes to
run the command (an LPUSH round trip here: 70 µs blocking, 27 µs spinning). The spin is bounded, and it is
skipped while this thread's recent round trips took longer than the bound (a distant Redis), so it only
ever trades a few microseconds of CPU for a wake-up. It is also skipped for a call that does not follow
another within a millisecond: after a pause every step runs cold and the reply takes longer than the
bound anyway, and a spinning producer would hold a core that Redis and the worker it wakes need (idle
pick-up measured 3-6% slower with it).
"""

import os
import select
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

import redis
from hiredis import pack_command
from redis.exceptions import ResponseError

type Arg = str | int | float | bytes
type Command = Sequence[Arg]

FLUSH_BYTES = 16_384
RTT_WEIGHT = 0.1  # of the newest round trip in the moving average that decides whether to spin
BURST_GAP_S = 0.001  # spin only for a call made this soon after the thread's previous one ended


class _Held:
    """A connection a thread keeps out of the pool; back to the pool when the thread's locals go."""

    def __init__(self, pool: "redis.ConnectionPool") -> None:
        self.pid = os.getpid()
        self.conn: Any = pool.get_connection()  # redis-py types its methods loosely
        self.rtt_s = 0.0  # moving average of round trips within bursts, each capped at twice the spin bound
        self.last_done = -1.0  # perf_counter() when the previous call that may spin ended
        self._poll: Any = None
        self._polled_fd = -1
        weakref.finalize(self, pool.release, self.conn)

    def spin_until_readable(self, spin_s: float) -> None:
        """Poll (without blocking) until the reply's first bytes are readable or `spin_s` has passed;
        the read that follows then finds them without sleeping."""
        sock = getattr(self.conn, "_sock", None)
        if sock is None:
            return
        fd = sock.fileno()
        if fd != self._polled_fd:  # first use, or redis-py reconnected
            self._poll = select.poll()
            self._poll.register(fd, select.POLLIN)
            self._polled_fd = fd
        poll, deadline = self._poll.poll, time.perf_counter() + spin_s
        while not poll(0) and time.perf_counter() < deadline:
            pass

    def in_burst(self, now: float) -> bool:
        return now - self.last_done < BURST_GAP_S

    def note_round_trip(self, started: float, in_burst: bool, spin_s: float) -> None:
        """Only round trips inside a burst count: one after a pause runs cold and says nothing of Redis's
        distance."""
        self.last_done = time.perf_counter()
        if in_burst:
            self.rtt_s += (min(self.last_done - started, 2 * spin_s) - self.rtt_s) * RTT_WEIGHT


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

    def execute(self, commands: Sequence[Command], spin_s: float = 0.0) -> list[Any]:
        """Send every command in one write; replies in order, Redis error replies as exception values.
        `spin_s` > 0: wait for the reply spinning rather than sleeping, at most that long (see above)."""
        if self._retry is None:
            return self._execute_once(commands, spin_s)
        return self._retry.call_with_retry(lambda: self._execute_once(commands, spin_s), lambda _error: None)  # type: ignore[no-any-return]

    def _held(self) -> _Held:
        held: _Held | None = getattr(self._local, "held", None)
        if held is None or held.pid != os.getpid():  # none yet, or inherited through fork: not ours to use
            held = self._local.held = _Held(self.pool)
        return held

    def _execute_once(self, commands: Sequence[Command], spin_s: float) -> list[Any]:
        held = self._held()
        conn = held.conn
        started = time.perf_counter() if spin_s > 0 else 0.0
        in_burst = spin_s > 0 and held.in_burst(started)
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
            if in_burst and held.rtt_s <= spin_s:
                held.spin_until_readable(spin_s)
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(conn.read_response())
                except ResponseError as exc:  # one failed command does not spoil the others' replies
                    replies.append(exc)
            if spin_s > 0:
                held.note_round_trip(started, in_burst, spin_s)
            return replies
        except BaseException:
            conn.disconnect()  # a half-read reply stream must never be reused; the next call reconnects
            raise
