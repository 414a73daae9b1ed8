"""The hot-path connection: pipelined commands, error replies in place, one connection per thread."""

import gc
import threading

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
