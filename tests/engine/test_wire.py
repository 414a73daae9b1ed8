"""The hot-path connection: pipelined commands, error replies in place, one connection per thread."""

import gc
import threading
import time

import redis

from jobconsole.core.wire import EXPLORE_EVERY, Wire


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


def test_a_burst_waits_the_way_that_has_been_faster_and_a_distant_redis_is_never_spun_for(
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
    for _ in range(EXPLORE_EVERY * 4):
        wire.execute([["PING"]], spin_s=spin_s)
    assert held.rtt_spin_s > 0 and held.rtt_block_s > 0  # both ways measured (the other every 16th call)
    # The way that has been faster is used, the other tried once every EXPLORE_EVERY calls in a burst.
    now = held.last_done
    for spin_faster in (True, False):
        held.rtt_spin_s, held.rtt_block_s = (0.00003, 0.00006) if spin_faster else (0.00006, 0.00003)
        choices = [held.choose_spin(now, spin_s) for _ in range(EXPLORE_EVERY)]
        assert choices.count(spin_faster) == EXPLORE_EVERY - 1 and choices.count(not spin_faster) == 1
    assert held.choose_spin(now + 0.01, spin_s) is None  # a call after a pause: neither counted nor spun
    # Round trips of 5 ms (a distant or busy Redis): spinning could not catch the reply; it stops.
    slow = (
        "local t = redis.call('TIME') while true do local n = redis.call('TIME') "
        "if (n[1] - t[1]) * 1000000 + n[2] - t[2] > 5000 then return 1 end end"
    )
    for _ in range(EXPLORE_EVERY * 4):
        wire.execute([["EVAL", slow, 0]], spin_s=spin_s)
    assert held.rtt_spin_s > spin_s
    spun = len(spins)
    for _ in range(EXPLORE_EVERY - 1):
        if held.burst_calls % EXPLORE_EVERY != EXPLORE_EVERY - 1:  # not the try of the other way
            wire.execute([["EVAL", slow, 0]], spin_s=spin_s)
    assert len(spins) == spun
    # After a pause, or for a caller that does not ask, no spinning.
    time.sleep(0.01)
    wire.execute([["PING"]], spin_s=spin_s)
    wire.execute([["PING"]])
    assert len(spins) == spun
