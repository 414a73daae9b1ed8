"""What the hot path's scripts cost inside Redis, this checkout against another one (e.g. before a change to them).

    .venv/bin/python bench/script_cost.py --baseline /work/main [--rounds 5] [--jobs 20000] [--batch 10]

One private redis-server. Each round, for each checkout in turn (alternating, so drift hits both alike), a child
process importing that checkout's engine enqueues `--jobs` jobs, claims them all in batches of `--batch`
(claim.lua), then acknowledges them in batches of `--batch` (complete.lua) with run times spread over a few
histogram buckets (1 to 40 ms). Redis's own accounting (INFO commandstats, reset before each phase) gives the
microseconds per script call; the wall time of each phase is the client's view. Medians over the rounds.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUNTIMES_MS = [1, 1, 2, 2, 3, 5, 8, 40]


def measure(url: str, jobs: int, batch: int) -> dict[str, Any]:
    """Run in a child whose PYTHONPATH starts with the checkout to measure."""
    import jobconsole
    from jobconsole.core import Client, JobSpec, TaskRegistry
    from jobconsole.core.connection import connect
    from jobconsole.core.store import Store, WorkerIdentity

    r = connect(url)
    r.flushall()
    registry = TaskRegistry()

    @registry.task(name="bench.cost", queue="cost")
    def cost() -> None:
        pass

    Client(r, registry).enqueue_many([JobSpec(task="bench.cost") for _ in range(jobs)])
    store = Store(r, events_maxlen=100_000)
    store.load_scripts()
    worker = WorkerIdentity("bench-worker", "host", 1)
    out: dict[str, Any] = {"code": str(Path(jobconsole.__file__).parents[1])}

    r.config_resetstat()
    started = time.perf_counter()
    leases = []
    while True:
        got = store.run(store.claim_call("cost", worker, batch, idle_ms=0)).leases
        if not got:
            break
        leases += got
    out["claim_wall_s"] = time.perf_counter() - started
    stats = r.info("commandstats")["cmdstat_evalsha"]
    out["claim_us_per_call"] = stats["usec_per_call"]
    out["claims"] = stats["calls"]

    rng = random.Random(7)
    r.config_resetstat()
    started = time.perf_counter()
    for start in range(0, len(leases), batch):
        acks = [(x.id, x.token, "null", rng.choice(RUNTIMES_MS)) for x in leases[start : start + batch]]
        store.run(store.complete_call("cost", acks, ttl_ms=3_600_000))
    out["complete_wall_s"] = time.perf_counter() - started
    stats = r.info("commandstats")["cmdstat_evalsha"]
    out["complete_us_per_call"] = stats["usec_per_call"]
    out["completes"] = stats["calls"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=False, help="the other checkout (its repository root)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # child mode: the Redis URL
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.jobs, args.batch)))
        return
    sys.path.insert(0, str(ROOT / "bench"))
    from run_peers import private_redis

    checkouts = {"this": ROOT}
    if args.baseline:
        checkouts = {"baseline": args.baseline.resolve(), **checkouts}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in checkouts}
    with private_redis("redis-server") as url:
        for _ in range(args.rounds):
            for name, root in checkouts.items():
                env = {**os.environ, "PYTHONPATH": str(root)}
                child = [sys.executable, __file__, "--measure", url]
                child += ["--jobs", str(args.jobs), "--batch", str(args.batch)]
                reply = subprocess.run(child, env=env, cwd=root, check=True, capture_output=True, text=True)
                measured = json.loads(reply.stdout)
                assert Path(measured["code"]) == root, f"{name} imported {measured['code']}, not {root}"
                results[name].append(measured)
    keys = ["claim_us_per_call", "complete_us_per_call", "claim_wall_s", "complete_wall_s"]
    print(f"{args.jobs} jobs, batches of {args.batch}, {args.rounds} rounds (medians; all rounds in brackets)")
    for key in keys:
        line = [f"{key:22}"]
        for name in checkouts:
            values = [r[key] for r in results[name]]
            line.append(f"{name} {statistics.median(values):8.3f} [{', '.join(f'{v:.2f}' for v in values)}]")
        print("  ".join(line))


if __name__ == "__main__":
    main()
