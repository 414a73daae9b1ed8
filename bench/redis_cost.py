"""What one job costs Redis: the CPU that caps a single queue (every job of a queue passes through one Redis core,
one hash slot even on a cluster).

    .venv/bin/python bench/redis_cost.py [--jobs 20000] [--workers 2] [--sample 2000]

On a private redis-server without persistence it measures three phases on one queue, with jobs whose parameters
are issue 31's dict of about 130 bytes (`--params small`: three short fields, under Redis's 64-byte listpack
limit):

1. enqueue: `--jobs` jobs one at a time (`Client.enqueue`, the producer's usual call), no worker running;
2. drain: `--workers` `runworker --burst` processes run them all (the Procfile's flags: no mirror, no system
   worker), the task being a no-op that touches no Redis key (examples.echo, results kept as shipped);
3. mirror: `runmirror --burst` applies every event to a fresh SQLite database (the mirror's reads);
4. with `--steady RATE`: the workers started first and kept running, `--jobs` more enqueued one by one at RATE
   jobs/s (what a queue that keeps up costs: jobs handed to idle workers or claimed straight from the intake);
5. with `--idle SECONDS`: the Procfile's worker, mirror and system processes running with no work for SECONDS
   (what an idle deployment costs Redis each second, by command and by process).

First, the floor of a one-by-one enqueue: Redis CPU per `PING` sent one at a time by a lone client.
For each phase: Redis CPU per job (INFO cpu, user + system), commands per job (INFO commandstats; commands run
inside scripts count, as Redis counts them), and the ceiling it sets on one queue (1 s of one core divided by the
CPU per job); the producer's own CPU per enqueue; and per phase the calls and µs per job of each command (INFO
commandstats; a script's µs include those of the commands it ran, which are listed on their own too).
Then, on `--sample` more jobs with SLOWLOG recording every command, where the script time goes:
microseconds per job in each script (its inner commands included) and in each command run inside scripts.
SLOWLOG adds its own cost, so those are shares, not the CPU figures above.
"""

import argparse
import collections
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PARAMS = {
    # issue 31's job: one dict of about 130 bytes (over 64: a hash holding it leaves the listpack encoding)
    "issue": {"i": 48213, "pad": "x" * 100, "n": 7},
    "small": {"user_id": 48213, "email": "ada@example.com", "plan": "pro"},
}
QUEUE = "examples.echo"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=2, help="runworker processes draining the queue")
    parser.add_argument("--sample", type=int, default=2000, help="jobs measured again with SLOWLOG on (0: skip)")
    parser.add_argument("--params", choices=sorted(PARAMS), default="issue", help="the job's parameters")
    parser.add_argument(
        "--steady", type=int, default=0, metavar="RATE",
        help="then, with the workers already running, enqueue --jobs more at RATE jobs/s (0: skip)",
    )  # fmt: skip
    parser.add_argument(
        "--idle", type=float, default=0, metavar="SECONDS",
        help="then the Procfile's processes idle this long: Redis CPU and commands per second (0: skip)",
    )  # fmt: skip
    args = parser.parse_args()

    import private_stack

    server, env = private_stack.start("jc-redis-cost-")
    try:
        import jobconsole.examples  # noqa: F401
        from jobconsole.core import Client, default_registry, scripts
        from jobconsole.core.connection import connect

        redis = connect(server.url)
        redis.config_set("appendonly", "no")  # as the peer benchmark runs Redis: no persistence
        manage = [sys.executable, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "-v0"], env=env, cwd=ROOT, check=True)
        worker = [*manage, "runworker", "--queues", QUEUE, "--burst", "--no-mirror", "--no-maintenance",
                  "--no-scheduler", "--no-system-worker"]  # fmt: skip
        client = Client(redis, default_registry)
        redis.sadd("jc:{meta}:queues", QUEUE)
        subprocess.run([*manage, "runmirror", "--burst"], env=env, cwd=ROOT, check=True, capture_output=True)

        params = PARAMS[args.params]

        def enqueue(n: int) -> None:
            for _ in range(n):
                client.enqueue(QUEUE, params)

        def drain() -> None:
            procs = [subprocess.Popen(worker, env=env, cwd=ROOT) for _ in range(args.workers)]
            for p in procs:
                if p.wait() != 0:
                    sys.exit(f"runworker exited with {p.returncode}")

        def mirror() -> None:
            subprocess.run([*manage, "runmirror", "--burst"], env=env, cwd=ROOT, check=True, capture_output=True)

        # The floor under a one-by-one enqueue: what one request and its reply cost Redis when a lone client sends
        # them one at a time (reading, writing and waking up between requests, which a VM makes dear).
        pings = min(args.jobs, 5000)
        cpu = redis_cpu(redis)
        for _ in range(pings):
            redis.ping()
        ping_us = (redis_cpu(redis) - cpu) / pings * 1e6
        phases: list[tuple[str, Callable[[], None]]] = [
            ("enqueue", lambda: enqueue(args.jobs)),
            ("drain", drain),
            ("mirror", mirror),
        ]
        rows = []
        producer_us = 0.0
        breakdowns: list[tuple[str, dict[str, Any]]] = []
        for name, run in phases:
            redis.config_resetstat()
            cpu, started, own = redis_cpu(redis), time.monotonic(), time.process_time()
            run()
            cpu, wall = redis_cpu(redis) - cpu, time.monotonic() - started
            if name == "enqueue":  # what a web request pays per enqueue (this process is the producer)
                producer_us = (time.process_time() - own) / args.jobs * 1e6
            stats = {c.removeprefix("cmdstat_"): s for c, s in redis.info("commandstats").items() if not _harness(c)}
            commands = sum(s["calls"] for s in stats.values())
            rows.append((name, cpu / args.jobs * 1e6, commands / args.jobs, args.jobs / wall))
            breakdowns.append((name, stats))
        print(f"Redis CPU per job, {args.jobs:,} jobs, {args.workers} worker processes:")
        for name, us, commands, rate in rows:
            print(f"  {name:8s} {us:6.1f} µs  {commands:5.1f} commands  ({rate:,.0f} jobs/s in this phase)")
        print(f"  producer CPU per enqueue (this process, user + system): {producer_us:.1f} µs")
        print(f"  floor: one PING at a time costs Redis {ping_us:.1f} µs a round trip here (every enqueue is one)")
        engine = sum(r[1] for r in rows[:2])
        total = engine + rows[2][1]
        print(f"  engine (enqueue + drain): {engine:.1f} µs/job, a ceiling of {1e6 / engine:,.0f} jobs/s per queue")
        print(f"  with the mirror's reads:  {total:.1f} µs/job, a ceiling of {1e6 / total:,.0f} jobs/s per queue")
        print("by command, calls x µs per job (INFO commandstats; a script's µs include its inner commands'):")
        for name, stats in breakdowns:
            top = sorted(stats.items(), key=lambda kv: -kv[1]["usec"])
            listed = ", ".join(f"{c} {s['calls'] / args.jobs:.2f}x {s['usec'] / args.jobs:.1f}" for c, s in top[:12])
            print(f"  {name:8s} {listed}")

        if args.steady:
            steady(redis, client, params, [a for a in worker if a != "--burst"], env, args)

        if args.idle:
            idle(redis, manage, env, args.idle)

        if args.sample:
            names = {scripts.load(n).sha: n for n in scripts.names()}
            redis.config_set("slowlog-log-slower-than", 0)
            redis.config_set("slowlog-max-len", 50 * args.sample)
            for name, run in (("enqueue", lambda: enqueue(args.sample)), ("drain", drain)):
                redis.slowlog_reset()
                run()
                entries = redis.slowlog_get(50 * args.sample)
                print(f"where {name}'s script time goes (SLOWLOG, {args.sample:,} jobs; µs per job):")
                for label, us in _split(entries, names, args.sample):
                    print(f"  {label:40s} {us:6.1f}")
            redis.config_set("slowlog-log-slower-than", 10000)
    finally:
        server.stop()


def steady(redis: Any, client: Any, params: dict[str, Any], worker: list[str], env: dict[str, str], args: Any) -> None:
    """The usual production case: workers running and keeping up while jobs arrive one by one at `args.steady`
    jobs/s. Enqueue, claim, completion and the workers' idle upkeep together, per job (the mirror not running)."""
    procs = [subprocess.Popen(worker, env=env, cwd=ROOT) for _ in range(args.workers)]
    try:
        time.sleep(3)  # started and waiting idle
        done = client.counts(QUEUE).completed
        redis.config_resetstat()
        cpu, started = redis_cpu(redis), time.monotonic()
        for i in range(args.jobs):
            client.enqueue(QUEUE, params)
            ahead = started + (i + 1) / args.steady - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        deadline = time.monotonic() + 120
        while client.counts(QUEUE).completed < done + args.jobs:
            if time.monotonic() > deadline:
                sys.exit("steady: the workers did not complete every job in 120 s")
            time.sleep(0.05)
        cpu, wall = redis_cpu(redis) - cpu, time.monotonic() - started
        stats = {c.removeprefix("cmdstat_"): s for c, s in redis.info("commandstats").items() if not _harness(c)}
        commands = sum(s["calls"] for s in stats.values()) / args.jobs
        print(
            f"steady, {args.jobs:,} jobs at {args.steady:,}/s asked ({args.jobs / wall:,.0f}/s done), workers running:"
        )
        print(f"  enqueue + drain {cpu / args.jobs * 1e6:6.1f} µs of Redis CPU per job, {commands:.1f} commands")
        top = sorted(stats.items(), key=lambda kv: -kv[1]["calls"])
        print("  by command, calls x µs per job:", ", ".join(
            f"{c} {v['calls'] / args.jobs:.2f}x {v['usec'] / args.jobs:.1f}" for c, v in top[:16]
        ))  # fmt: skip
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


# The Procfile's long-running processes but the web (its requests are not idle upkeep), as its rows start them.
PROCFILE_IDLE = {
    "worker": ["runworker", "--processes", "auto", "--no-system-worker", "--no-mirror"],
    "mirror": ["runmirror"],
    "system": ["runworker", "--queues", "jobconsole.system", "--no-system-worker", "--no-mirror", "--no-maintenance",
               "--no-scheduler"],
}  # fmt: skip


def idle(redis: Any, manage: list[str], env: dict[str, str], seconds: float) -> None:
    """What a deployment with no work costs Redis: no process (Redis's own timers), each Procfile process alone,
    then all of them together, for `seconds` each after a settling pause (their start-up is not upkeep). Per
    second: Redis CPU and commands."""
    runs = [[], *([name] for name in PROCFILE_IDLE), list(PROCFILE_IDLE)]
    print(f"idle, {seconds:g} s a run, Redis CPU (ms) and commands per second:")
    for names in runs:
        procs = [subprocess.Popen([*manage, *PROCFILE_IDLE[n]], env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
                 for n in names]  # fmt: skip
        try:
            time.sleep(5)
            redis.config_resetstat()
            cpu = redis_cpu(redis)
            time.sleep(seconds)
            cpu = redis_cpu(redis) - cpu
            stats = {c.removeprefix("cmdstat_"): s for c, s in redis.info("commandstats").items() if not _harness(c)}
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(timeout=30)
        calls = sum(s["calls"] for s in stats.values()) / seconds
        top = sorted(stats.items(), key=lambda kv: -kv[1]["usec"])[:8]
        listed = ", ".join(f"{c} {s['calls'] / seconds:.1f}/s" for c, s in top)
        label = " + ".join(names) or "no process"
        print(f"  {label:22s} {cpu / seconds * 1000:5.2f} ms/s  {calls:6.1f} commands/s: {listed}")


def redis_cpu(redis: Any) -> float:
    info = redis.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def _harness(command: str) -> bool:
    """This script's own commands (INFO, CONFIG, SLOWLOG) are not the job's."""
    return command.split("_", 1)[1].split("|")[0] in {"info", "config", "slowlog"}


def _split(entries: list[dict[str, Any]], names: dict[str, str], jobs: int) -> list[tuple[str, float]]:
    """Microseconds per job by script (inner commands included) and by command run inside scripts."""
    by_script: dict[str, float] = collections.defaultdict(float)
    by_command: dict[str, float] = collections.defaultdict(float)
    for entry in entries:
        words = entry["command"].decode(errors="replace").split() if isinstance(entry["command"], bytes) else []
        words = words or str(entry["command"]).split()
        if not words or words[0].lower() in {"slowlog", "config", "info"}:
            continue
        verb = words[0].lower()
        if verb in {"evalsha", "eval"}:
            by_script[f"script {names.get(words[1], words[1][:8])}"] += entry["duration"]
        else:
            by_command[f"  {verb}"] += entry["duration"]
    top = sorted(by_script.items(), key=lambda kv: -kv[1]) + sorted(by_command.items(), key=lambda kv: -kv[1])[:8]
    return [(label, us / jobs) for label, us in top]


if __name__ == "__main__":
    main()
