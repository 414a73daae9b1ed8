"""Where an idle pick-up's time goes on this machine: the same steps run warm (back to back) and cold (after
the process slept as long as the latency benchmark's gaps), on a private redis-server.

    .venv/bin/python bench/cold_path.py [--samples 150] [--gap-ms 40]

Steps: a 200-iteration Python loop (no I/O at all), a PING round trip, `Client._prepare` of a job (the client's
own work before it sends), and a whole `Client.enqueue` with and without spinning for the reply, each with the
time Redis spent inside the enqueue script (SLOWLOG, threshold 0). No worker runs, so those enqueues take the
intake path (one XADD in the script). The last step registers an idle worker before each gap (untimed), so
the enqueue takes the hand-off path of the latency benchmark: the job is leased to that worker and pushed to
its inbox, 17 Redis calls in the script. Medians and p95 in µs.
"""

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import redis  # noqa: E402
from run_peers import private_redis  # noqa: E402

from jobconsole.core import Client, JobSpec  # noqa: E402
from jobconsole.core.connection import connect  # noqa: E402
from jobconsole.core.keys import QueueKeys, queue_keys  # noqa: E402

TASK = "bench.cold"


def busy_loop() -> int:
    total = 0
    for i in range(200):
        total += i
    return total


def measure(
    step: Callable[[], object], samples: int, gap_s: float, before: Callable[[], object] | None = None
) -> list[float]:
    """Time `step` `samples` times, each after `before` (untimed) and a sleep of `gap_s`."""
    out = []
    for _ in range(samples):
        if before is not None:
            before()
        if gap_s:
            time.sleep(gap_s)
        t0 = time.perf_counter()
        step()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def idle_worker(r: "redis.Redis", k: QueueKeys) -> Callable[[], None]:
    """Forget earlier jobs and the previous hand-off, and register a (fake) idle worker, as a real one does
    after its ack."""

    def register() -> None:
        pipe = r.pipeline(transaction=False)
        pipe.delete(k.inbox("cold-worker"), k.active, k.ready, k.intake)  # nothing ahead of the job
        pipe.zadd(k.idle, {json.dumps(["cold-worker", "cold-host", 1]): 2**50})
        pipe.execute()

    return register


def script_times(r: "redis.Redis") -> list[float]:
    return [float(e["duration"]) for e in r.slowlog_get(100_000) if b"EVALSHA" in e["command"].upper()[:10]]


def fmt(values: list[float]) -> str:
    if len(values) < 2:
        return "-"
    p95 = statistics.quantiles(values, n=100)[94]
    return f"{statistics.median(values):8.1f} {p95:8.1f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", type=int, default=150)
    p.add_argument("--gap-ms", type=float, default=40.0)
    args = p.parse_args()
    with private_redis("redis-server") as url:
        r = redis.Redis.from_url(url)
        spinning = Client(connect(url), strict=False)
        blocking = Client(connect(url), strict=False, spin_us=0)
        ping = connect(url)
        for c in (spinning, blocking):
            c.enqueue(TASK)  # registers the queue and loads the scripts
        r.config_set("slowlog-log-slower-than", 0)
        r.config_set("slowlog-max-len", 100_000)
        header = f"{'step (µs)':<34} {'warm p50':>8} {'p95':>8}   {'cold p50':>8} {'p95':>8}"
        print(f"{header}   (cold = after {args.gap_ms:g} ms asleep)")
        handed_off = idle_worker(r, queue_keys(TASK))
        steps: list[tuple[str, Callable[[], object], Callable[[], object] | None]] = [
            ("200-iteration Python loop", busy_loop, None),
            ("PING round trip", ping.ping, None),
            ("client prepares the job", lambda: spinning._prepare(JobSpec(task=TASK)), None),
            ("enqueue, blocking for the reply", lambda: blocking.enqueue(TASK), None),
            ("enqueue, spinning for the reply", lambda: spinning.enqueue(TASK), None),
            ("enqueue handed to an idle worker", lambda: spinning.enqueue(TASK), handed_off),
        ]
        for name, step, before in steps:
            row = []
            scripts = []
            for gap in (0.0, args.gap_ms / 1000):
                r.slowlog_reset()
                row.append(fmt(measure(step, args.samples, gap, before)))
                scripts.append(fmt(script_times(r)))
            print(f"{name:<34} {row[0]}   {row[1]}")
            if name.startswith("enqueue"):
                print(f"{'  of which Redis runs the script':<34} {scripts[0]}   {scripts[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
