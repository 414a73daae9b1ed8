"""What the hot path's scripts cost inside Redis: this checkout's claim.lua and complete.lua against another
checkout's (e.g. the commit before a change to them), paired call by call so that a busy machine slows both alike.

    .venv/bin/python bench/script_cost.py --baseline /path/to/other/checkout [--jobs 10000] [--batch 10]

One private redis-server holds both versions of each script (their KEYS and ARGV must be the same) and two queues
of `--jobs` jobs each. The calls alternate: a claim of `--batch` jobs with the baseline's script on one queue,
then with this checkout's on the other, and so on until both are empty; then the acknowledgements the same way,
in batches of `--batch`, with run times of 2 to 5 ms (two histogram buckets; `--spread wide`: 1 to 40 ms, five).
SLOWLOG (threshold 0) gives each call's duration inside Redis; the figures are each version's median, mean and
p90 in µs, the median of the paired differences (this minus baseline), and the HINCRBYs each ran per call.
"""

import argparse
import hashlib
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import redis  # noqa: E402
from run_peers import private_redis  # noqa: E402

from jobconsole.core import Client, JobSpec, TaskRegistry, scripts  # noqa: E402
from jobconsole.core.connection import connect  # noqa: E402
from jobconsole.core.store import Store, WorkerIdentity  # noqa: E402

RUNTIMES_MS = {
    "narrow": [2, 3, 3, 3, 4, 5],  # one task's usual spread: two buckets
    "wide": [1, 1, 2, 2, 3, 5, 8, 40],  # five buckets: a batch of acks touches about four
}


def baseline_source(checkout: Path, name: str) -> str:
    """A script as the other checkout's own scripts.py builds it (its prelude, helpers and tables), read in a
    subprocess that imports that checkout; for an old checkout without `scripts.load`, the shebang, its metrics
    constants, _lib.lua and the body, as it built them then."""
    build = "import sys; from jobconsole.core import scripts; sys.stdout.write(scripts.load(sys.argv[1]).source)"
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    built = subprocess.run([sys.executable, "-c", build, name], cwd=checkout, env=env, capture_output=True, text=True)
    if built.returncode == 0:
        return built.stdout
    lua = checkout / "jobconsole" / "core" / "lua"
    shebang, _, body = (lua / f"{name}.lua").read_text().partition("\n")
    constants = ""
    if (checkout / "jobconsole" / "core" / "metrics.py").exists():
        namespace: dict[str, Any] = {}
        exec((checkout / "jobconsole" / "core" / "metrics.py").read_text(), namespace)
        constants = namespace["LUA_CONSTANTS"]
    return f"{shebang}\n{constants}{(lua / '_lib.lua').read_text()}\n{body}"


def load(r: "redis.Redis", source: str) -> str:
    r.script_load(source)
    return hashlib.sha1(source.encode()).hexdigest()


def durations(r: "redis.Redis", shas: dict[str, str]) -> dict[str, list[int]]:
    """Each version's call durations (µs) from SLOWLOG, oldest first."""
    by_sha = {sha: name for name, sha in shas.items()}
    out: dict[str, list[int]] = {name: [] for name in shas}
    for entry in reversed(r.slowlog_get(10_000_000)):
        parts = bytes(entry["command"]).split()
        if len(parts) > 1 and parts[0].upper() == b"EVALSHA" and parts[1].decode() in by_sha:
            out[by_sha[parts[1].decode()]].append(int(entry["duration"]))
    return out


def report(title: str, found: dict[str, list[int]], commands: dict[str, float]) -> None:
    base, this = found["baseline"], found["this"]
    diffs = [b - a for a, b in zip(base, this, strict=False)]
    print(f"{title}: {len(base)} calls each")
    for name, values in (("baseline", base), ("this", this)):
        p90 = statistics.quantiles(values, n=10)[-1]
        print(
            f"  {name:8} median {statistics.median(values):7.1f}  mean {statistics.fmean(values):7.1f}  "
            f"p90 {p90:7.1f} µs  ({commands[name]:.2f} HINCRBY per call)"
        )
    print(
        f"  paired difference (this - baseline): median {statistics.median(diffs):+.1f} µs "
        f"({statistics.median(diffs) / statistics.median(base):+.1%} of the baseline's median)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout (its repository root)")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--spread", choices=sorted(RUNTIMES_MS), default="narrow", help="of the run times")
    parser.add_argument(
        "--intake",
        action="store_true",
        help="before each pair of claims, enqueue --batch jobs one per call into each queue (issue 31's 130-byte "
        "parameters), which wait in its intake: the claims then drain the intake and lease those jobs",
    )
    args = parser.parse_args()
    with private_redis("redis-server") as url:
        r = connect(url)
        r.config_set("slowlog-log-slower-than", 0)
        r.config_set("slowlog-max-len", 10_000_000)
        registry = TaskRegistry()

        @registry.task(name="bench.cost")
        def cost(i: int = 0, pad: str = "", n: int = 0) -> None:
            pass

        queues = {"baseline": "cost-baseline", "this": "cost-this"}
        client = Client(r, registry)
        if not args.intake:
            for queue in queues.values():
                client.enqueue_many([JobSpec(task="bench.cost", queue=queue) for _ in range(args.jobs)])
        params = {"i": 48213, "pad": "x" * 100, "n": 7}  # as bench/redis_cost.py's default
        store = Store(r, events_maxlen=100_000)
        worker = WorkerIdentity("bench-worker", "host", 1)
        # A script the two checkouts share is loaded twice, under two SHAs (a trailing comment), so each
        # version's calls can still be told apart in SLOWLOG.
        shas = {
            name: {
                "baseline": load(r, baseline_source(args.baseline, name)),
                "this": load(r, scripts.load(name).source + "\n-- this checkout"),
            }
            for name in ("claim", "complete")
        }
        hincrbys = {name: dict.fromkeys(queues, 0) for name in shas}

        def run(script: str, version: str, call: Any) -> Any:
            """One call of a version of a script, counting the HINCRBYs it ran."""
            before = r.info("commandstats").get("cmdstat_hincrby", {}).get("calls", 0)
            reply = r.evalsha(shas[script][version], len(call.keys), *call.keys, *call.args)
            hincrbys[script][version] += r.info("commandstats")["cmdstat_hincrby"]["calls"] - before
            if script == "claim" and len(reply) > 3 and isinstance(reply[3], list):  # a checkout before flat leases
                reply = [*reply[:3], *(value for lease in reply[3:] for value in lease)]
            return call.decode(reply)

        leases: dict[str, list[Any]] = {version: [] for version in queues}
        r.slowlog_reset()
        enqueued = 0
        while True:
            claimed = 0
            if args.intake and enqueued < args.jobs:
                for queue in queues.values():
                    for _ in range(args.batch):
                        client.enqueue("bench.cost", params, queue=queue)
                enqueued += args.batch
            for version, queue in queues.items():
                got = run("claim", version, store.claim_call(queue, worker, args.batch, idle_ms=0)).leases
                leases[version] += got
                claimed += len(got)
            if not claimed and (not args.intake or enqueued >= args.jobs):
                break
        claims = durations(r, shas["claim"])

        rng = random.Random(7)
        runtimes = [rng.choice(RUNTIMES_MS[args.spread]) for _ in range(args.jobs)]
        r.slowlog_reset()
        for start in range(0, args.jobs, args.batch):
            for version, queue in queues.items():
                batch = zip(leases[version][start : start + args.batch], runtimes[start:], strict=False)
                acks = [(x.id, x.token, "null", ms) for x, ms in batch]
                run("complete", version, store.complete_call(queue, acks, ttl_ms=3_600_000))
        completes = durations(r, shas["complete"])
        for script, found in (("claim", claims), ("complete", completes)):
            per_call = {v: hincrbys[script][v] / max(len(found[v]), 1) for v in queues}
            report(f"{script}.lua, batches of {args.batch}", found, per_call)


if __name__ == "__main__":
    main()
