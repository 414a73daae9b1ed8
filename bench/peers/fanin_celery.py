"""Celery's side of bench/workflow_peers.py: chord(member.s(i) for i in range(N))(total.s()) on Redis (broker and
result backend), run with var/bench/venv-a.

    BENCH_REDIS_URL=URL celery -A fanin_celery worker -P threads -c 10 -Q fan   # from bench/peers
    BENCH_REDIS_URL=URL python fanin_celery.py create --n N   # one call; prints {"t0": ..., "created_s": ...}

Stamps as in fanin_jobconsole.py.
"""

import argparse
import json
import os
import time
from typing import Any, cast

import redis
from celery import Celery, chord

URL = os.environ["BENCH_REDIS_URL"]
app = Celery("fanin", broker=URL, backend=URL)
app.conf.update(task_default_queue="fan", worker_hijack_root_logger=False, broker_connection_retry_on_startup=True)
stamps = redis.Redis.from_url(URL)


@app.task(name="fan.member")
def member(i: int) -> int:
    stamps.rpush("bench:ends", repr(time.time()))
    return i


@app.task(name="fan.callback")
def callback(results: list[int]) -> int:
    stamps.set("bench:cb_start", repr(time.time()))
    total = sum(results)
    stamps.rpush("bench:done", json.dumps({"cb_end": time.time(), "sum": total}))
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["create"])
    ap.add_argument("--n", type=int, default=10)
    args = ap.parse_args()
    with app.connection_for_write() as conn:
        conn.ensure_connection()
    cast(Any, app.backend).client.ping()  # the Redis result backend's own client
    header = [member.s(i) for i in range(args.n)]  # the description is built before the clock, as for the others
    t0 = time.time()
    p0 = time.perf_counter()
    chord(header)(callback.s())
    created = time.perf_counter() - p0
    print(json.dumps({"t0": t0, "created_s": created}))


if __name__ == "__main__":
    main()
