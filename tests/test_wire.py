"""The hot-path connection: pipelined commands, error replies in place, one connection per thread."""

import gc
import threading
import time

import redis

from jobconsole.core.wire import Wire


def test_replies_come_back_in_order_with_errors_in_place(r: "redis.Redis") -> None:
    wire = Wire(r)
    r.set("text", "abc")
    replies = wire.execute([["SET", "n", 1], ["INCR", "text"], ["INCR", "n"], ["GET", "text"]])
    assert replies[0] == "OK"
    assert isinstance(replies[1], redis.ResponseError) and "not an integer" in str(replies[1])
    assert replies[2:] == [2, "abc"]


def test_a_large_batch_goes_out_in_pieces_and_still_reads_back_whole(r: "redis.Redis") -> None:
    wire = Wire(r)
    replies = wire.execute([["RPUSH", "big", "x" * 1000] for _ in range(200)])  # ~200 KB, many flushes
    assert replies == list(range(1, 201))


def test_each_thread_keeps_one_connection_and_gives_it_back_when_it_ends(r: "redis.Redis") -> None:
    wire = Wire(r)
    pool = r.connection_pool
    in_use = len(pool._in_use_connections)  # type: ignore[attr-defined]

    def work() -> None:
        for _ in range(5):
            wire.execute([["PING"]])
        assert len(pool._in_use_connections) == in_use + 1  # type: ignore[attr-defined]  # one, reused

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    del thread
    gc.collect()
    assert len(pool._in_use_connections) == in_use  # type: ignore[attr-defined]


def test_a_broken_connection_is_replaced_on_the_next_call(r: "redis.Redis") -> None:
    wire = Wire(r)
    wire.execute([["PING"]])
    r.client_kill_filter(_type="normal", skipme=True)  # cut every other connection, ours included
    try:
        wire.execute([["PING"]])
    except redis.ConnectionError:
        pass  # a client without retries sees the cut once
    assert wire.execute([["PING"]]) == ["PONG"]


def test_a_spinning_call_reads_the_same_replies_and_survives_a_reconnect(r: "redis.Redis") -> None:
    wire = Wire(r)
    assert wire.execute([["SET", "k", "v"], ["GET", "k"]], spin_s=0.0002) == ["OK", "v"]
    r.client_kill_filter(_type="normal", skipme=True)  # the spin's poll must follow the new socket
    try:
        wire.execute([["PING"]], spin_s=0.0002)
    except redis.ConnectionError:
        pass
    assert wire.execute([["GET", "k"]], spin_s=0.0002) == ["v"]


def test_spinning_stops_while_round_trips_take_longer_than_the_bound_and_resumes_when_they_are_short(
    r: "redis.Redis",
) -> None:
    wire = Wire(r)
    spin_s = 0.0002
    spins: list[float] = []
    held = wire._held()
    real_spin = held.spin_until_readable
    held.spin_until_readable = lambda s: (spins.append(s), real_spin(s))[1]  # type: ignore[method-assign]
    wire.execute([["PING"]], spin_s=spin_s)
    assert spins == []  # the first call of a burst does not spin: after a pause the reply is slow anyway
    wire.execute([["PING"]], spin_s=spin_s)
    assert len(spins) == 1  # the next, at once: a fast local Redis, so it spun
    # Round trips of 5 ms (a distant or busy Redis): the moving average passes the bound, spinning stops.
    for _ in range(30):
        wire.execute(
            [
                [
                    "EVAL",
                    "local t = redis.call('TIME') while true do local n = redis.call('TIME') "
                    "if (n[1] - t[1]) * 1000000 + n[2] - t[2] > 5000 then return 1 end end",
                    0,
                ]
            ],
            spin_s=spin_s,
        )
    assert held.rtt_s > spin_s
    before = len(spins)
    wire.execute([["PING"]], spin_s=spin_s)
    assert len(spins) == before
    # Short round trips again: the average falls under the bound and the calls spin again.
    for _ in range(60):
        wire.execute([["PING"]], spin_s=spin_s)
    assert held.rtt_s <= spin_s
    assert len(spins) > before
    spun = len(spins)
    time.sleep(0.01)
    wire.execute([["PING"]], spin_s=spin_s)  # after a pause: no spin
    wire.execute([["PING"]])  # a caller that does not ask to spin never does
    assert len(spins) == spun and held.rtt_s <= spin_s
