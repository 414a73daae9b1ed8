"""The engine's hot path to Redis: a batch of commands packed by hiredis in one buffer, sent on a pooled
connection, and the replies read straight back.

redis-py's client spends more time per command than Redis itself (argument type checks, per-command
callbacks, retry and observability wrappers). The worker's report-and-claim round trip and
every enqueue go through here instead; everything else uses the ordinary client on the same pool, so
timeouts, TLS, authentication and health checks stay redis-py's.

A caller that waits for a short reply (a producer's enqueue) may ask to spin for it: on a VM a thread that
blocks on its socket lets its vCPU halt, and waking it when the reply lands costs more than Redis takes to
run the command. But when the scheduler has put the thread on the same core as Redis, spinning only delays
Redis (bench/README.md has the measurements). So each
thread keeps a moving average of its round trips in both ways and waits the way that has been faster,
trying the other way on every EXPLORE_EVERY-th call; spinning is bounded and is not chosen while its round
trips take longer than the bound (a distant Redis). Only calls in a burst (made within BURST_GAP_S of the
thread's previous one) spin or count: after a pause every step runs cold, the reply is slower than the
bound anyway, and a spinning producer would hold a core that Redis and the worker it wakes need.
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
EXPLORE_EVERY = 16  # calls in a burst between two tries of the way of waiting that is not preferred


class _Held:
    """A connection a thread keeps out of the pool; back to the pool when the thread's locals go."""

    def __init__(self, pool: "redis.ConnectionPool") -> None:
        self.pid = os.getpid()
        self.conn: Any = pool.get_connection()  # redis-py types its methods loosely
        # Moving averages of round trips in bursts, spinning and blocking, each capped at twice the bound.
        self.rtt_spin_s = 0.0
        self.rtt_block_s = 0.0
        self.burst_calls = 0
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

    def choose_spin(self, now: float, spin_s: float) -> bool | None:
        """None: not in a burst (block, and do not count the round trip); else whether to spin this time."""
        if now - self.last_done >= BURST_GAP_S:
            return None
        self.burst_calls += 1
        prefer_spin = self.rtt_spin_s <= spin_s and self.rtt_spin_s <= self.rtt_block_s
        return prefer_spin != (self.burst_calls % EXPLORE_EVERY == 0)

    def note_round_trip(self, started: float, spun: bool | None, spin_s: float) -> None:
        self.last_done = time.perf_counter()
        if spun is None:
            return
        sample = min(self.last_done - started, 2 * spin_s)
        if spun:
            self.rtt_spin_s += (sample - self.rtt_spin_s) * RTT_WEIGHT
        else:
            self.rtt_block_s += (sample - self.rtt_block_s) * RTT_WEIGHT


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
        spin = held.choose_spin(started, spin_s) if spin_s > 0 else None
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
            if spin:
                held.spin_until_readable(spin_s)
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(conn.read_response())
                except ResponseError as exc:  # one failed command does not spoil the others' replies
                    replies.append(exc)
            if spin_s > 0:
                held.note_round_trip(started, spin, spin_s)
            return replies
        except BaseException:
            conn.disconnect()  # a half-read reply stream must never be reused; the next call reconnects
            raise
