"""A fan-out of N members with one callback in Jobconsole (a chord), Celery (a chord on Redis: broker and result
backend) and BullMQ (a flow: one parent, N children), taking turns, each turn on a new private redis-server.

    .venv/bin/python bench/workflow_peers.py [--peers jobconsole,celery,bullmq] [--n 1000,10000] [--repeat 3]
                                             [--timeout 300] [--no-setup]

Per turn: the system's worker (one process, concurrency 10) is started and warmed up by a fan-out of 10; then one
call creates the fan-out of N. Measured: (a) the creation call, in the client; (b) from the call's start to the
callback's end; (c) from the last member's end to the callback's start (wall-clock stamps the tasks write to
Redis); (d) Redis commands per member (INFO commandstats delta over creation and run, less the stamps) and Redis
memory per member still held after the callback (used_memory delta). Method: bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_peers import private_redis, redis_version

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var" / "bench"
LOGS = VAR / "logs"
RESULTS_FILE = VAR / "workflow_peers.json"
PEERS_DIR = ROOT / "bench" / "peers"
NODE_MODULES = VAR / "node" / "node_modules"
VENV_A = VAR / "venv-a" / "bin"
JC_PYTHON = ROOT / ".venv" / "bin" / "python"
WARMUP_N = 10


def log(msg: str) -> None:
    print(f"[workflow_peers] {msg}", file=sys.stderr, flush=True)


def commands(system: str, url: str, n: int) -> tuple[list[str], list[str], dict[str, str], Path]:
    """The system's worker command, its create command, the environment and working directory of both."""
    env = {**os.environ, "BENCH_REDIS_URL": url}
    if system == "jobconsole":
        script = str(PEERS_DIR / "fanin_jobconsole.py")
        worker = [str(JC_PYTHON), script, "worker", "--redis-url", url]
        return worker, [str(JC_PYTHON), script, "create", "--redis-url", url, "--n", str(n)], env, ROOT
    if system == "celery":
        worker = [str(VENV_A / "celery"), "-A", "fanin_celery", "worker", "-P", "threads", "-c", "10", "-Q", "fan",
                  "--loglevel", "WARNING"]  # fmt: skip
        return worker, [str(VENV_A / "python"), "fanin_celery.py", "create", "--n", str(n)], env, PEERS_DIR
    if system == "bullmq":
        env["NODE_PATH"] = str(NODE_MODULES)
        script = str(ROOT / "bench" / "node" / "fanin_bullmq.js")
        return ["node", script, "worker", url], ["node", script, "create", url, str(n)], env, ROOT
    raise SystemExit(f"unknown system {system!r}; known: jobconsole, celery, bullmq")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the worker's process group (Celery's pool and Node's children included), SIGKILL after 15 s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def create(cmd: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{cmd[1]} create failed: {out.stderr[-2000:]}")
    made: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return made


def cmdstats(r: redis.Redis) -> dict[str, int]:
    return {k: int(v["calls"]) for k, v in r.info("commandstats").items()}


def one_turn(system: str, url: str, n: int, timeout: float) -> dict[str, Any]:
    worker_cmd, create_cmd, env, cwd = commands(system, url, n)
    warm_cmd = commands(system, url, WARMUP_N)[1]
    r = redis.Redis.from_url(url, decode_responses=True, socket_timeout=None)  # BLPOP waits up to --timeout
    LOGS.mkdir(parents=True, exist_ok=True)
    with open(LOGS / f"workflow-{system}.log", "ab") as logf:
        worker = subprocess.Popen(worker_cmd, env=env, cwd=cwd, stdout=logf, stderr=logf, start_new_session=True)
        try:
            # Warm-up: the worker is up, the scripts loaded and the connections open before the measured call.
            create(warm_cmd, env, cwd)
            if r.blpop(["bench:done"], timeout=120) is None:
                raise RuntimeError("the warm-up fan-out of 10 did not finish in 120 s")
            r.delete("bench:ends", "bench:cb_start", "bench:done")
            mem0 = int(r.info("memory")["used_memory"])
            calls0 = cmdstats(r)
            made = create(create_cmd, env, cwd)
            done = r.blpop(["bench:done"], timeout=timeout)
            calls1 = cmdstats(r)
            mem1 = int(r.info("memory")["used_memory"])
            ends = [float(x) for x in r.lrange("bench:ends", 0, -1)]
            row: dict[str, Any] = {"system": system, "n": n, "created_s": made["created_s"], "members_ended": len(ends)}
            if done is None:
                return {**row, "ok": False, "error": f"the callback had not finished after {timeout:.0f} s "
                        f"({len(ends)} of {n} members ended)"}  # fmt: skip
            info = json.loads(done[1])
            cb_start = float(r.get("bench:cb_start") or "nan")
            delta = {k: calls1.get(k, 0) - calls0.get(k, 0) for k in calls1}
            # Less the harness's own: a stamp per member and the callback's two, the BLPOP, the INFOs.
            delta["cmdstat_rpush"] = delta.get("cmdstat_rpush", 0) - (n + 1)
            delta["cmdstat_set"] = delta.get("cmdstat_set", 0) - 1
            delta["cmdstat_blpop"] = delta.get("cmdstat_blpop", 0) - 1
            delta.pop("cmdstat_info", None)
            split = jobconsole_split(r, max(ends), cb_start) if system == "jobconsole" else {}
            top = sorted(((v, k.removeprefix("cmdstat_")) for k, v in delta.items() if v > 0), reverse=True)[:6]
            return {
                **row,
                "ok": info["sum"] == n * (n - 1) // 2 and len(ends) == n,
                "sum": info["sum"],
                "total_s": info["cb_end"] - made["t0"],
                "last_end_to_cb_start_ms": (cb_start - max(ends)) * 1000,
                "redis_cmds_per_member": sum(delta.values()) / n,
                "top_commands": {k: v for v, k in top},
                "redis_bytes_per_member_after": (mem1 - mem0) / n,
                **split,
            }
        finally:
            stop(worker)


SPLIT = ("jc_end_to_ack_ms", "jc_ack_to_claim_ms", "jc_claim_to_start_ms")


def jobconsole_split(r: redis.Redis, last_end: float, cb_start: float) -> dict[str, float]:
    """Where Jobconsole's (c) goes, from its job hashes (Redis clock = this machine's): the last member's end to its
    acknowledgement (which releases the callback), and that to the callback's claim and its first line."""
    sys.path.insert(0, str(ROOT))
    from jobconsole.core.keys import queue_keys

    acks: list[int] = []
    claimed = 0
    for key in r.scan_iter(match=queue_keys("fan").job_prefix + "*", count=1000, _type="hash"):
        task, finished, started = r.hmget(key, "task", "finished_at", "started_at")
        if task == "fan.member" and finished:
            acks.append(int(finished))
        elif task == "fan.callback" and started:
            claimed = max(claimed, int(started))  # the warm-up's callback is older
    last_ack = max(acks) / 1000
    return {
        "jc_end_to_ack_ms": (last_ack - last_end) * 1000,
        "jc_ack_to_claim_ms": (claimed / 1000 - last_ack) * 1000,
        "jc_claim_to_start_ms": (cb_start - claimed / 1000) * 1000,
    }


def versions() -> dict[str, str]:
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    out: dict[str, str] = {"python": platform.python_version(), "node": node}
    code = "import celery, kombu, redis; print(celery.__version__, kombu.__version__, redis.__version__)"
    celery = subprocess.run([str(VENV_A / "python"), "-c", code], capture_output=True, text=True).stdout.split()
    if celery:
        out |= {"celery": celery[0], "kombu": celery[1], "redis-py (celery)": celery[2]}
    pkg = NODE_MODULES / "bullmq" / "package.json"
    if pkg.exists():
        out["bullmq"] = json.loads(pkg.read_text())["version"]
        out["ioredis"] = json.loads((NODE_MODULES / "ioredis" / "package.json").read_text())["version"]
    return out


def p50(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get("ok") and r.get(key) is not None]
    return statistics.median(vals) if vals else None


def fmt(v: float | None, spec: str) -> str:
    return "—" if v is None else format(v, spec)


def table(results: list[dict[str, Any]], systems: list[str], sizes: list[int]) -> str:
    lines = [
        "| N | system | create (one call) | creation to callback end | last member end to callback start, p50 "
        "(min-max) | Redis commands / member | Redis bytes / member after | runs ok |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in sizes:
        for system in systems:
            rows = [r for r in results if r["system"] == system and r["n"] == n]
            ok = [r for r in rows if r.get("ok")]
            lat = [r["last_end_to_cb_start_ms"] for r in ok]
            spread = f" ({min(lat):.1f}-{max(lat):.1f})" if len(lat) > 1 else ""
            create_all = [r["created_s"] for r in rows if r.get("created_s") is not None]
            create_s = statistics.median(create_all) if create_all else None
            create_ms = fmt(create_s * 1000 if create_s is not None else None, ",.0f")
            lines.append(
                f"| {n:,} | {system} | {create_ms} ms | {fmt(p50(rows, 'total_s'), '.2f')} s "
                f"| {fmt(p50(rows, 'last_end_to_cb_start_ms'), '.1f')} ms{spread} "
                f"| {fmt(p50(rows, 'redis_cmds_per_member'), '.1f')} "
                f"| {fmt(p50(rows, 'redis_bytes_per_member_after'), ',.0f')} | {len(ok)}/{len(rows)} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", default="jobconsole,celery,bullmq")
    ap.add_argument("--n", default="1000,10000", help="fan-out sizes, comma-separated")
    ap.add_argument("--repeat", type=int, default=3, help="turns of each system at each size")
    ap.add_argument("--timeout", type=float, default=300, help="cap on a turn's wait for the callback, s")
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--no-setup", action="store_true", help="do not run bench/setup_peers.sh first")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the worker and redis-server on the way out
    systems = [s.strip() for s in args.peers.split(",") if s.strip()]
    sizes = [int(s) for s in args.n.split(",")]
    if not args.no_setup and set(systems) - {"jobconsole"}:
        subprocess.run(["bash", str(ROOT / "bench" / "setup_peers.sh")], check=True)
    load0 = os.getloadavg()
    started = time.time()
    results: list[dict[str, Any]] = []
    for n in sizes:
        for rep in range(args.repeat):
            for system in systems:  # taking turns, so the machine's drift spreads over every system
                with private_redis(args.redis_server) as url:
                    try:
                        row = one_turn(system, url, n, args.timeout)
                    except Exception as exc:  # noqa: BLE001 - a failed turn is a result, the run goes on
                        row = {"system": system, "n": n, "ok": False, "error": str(exc)[-500:]}
                row["repeat"] = rep
                results.append(row)
                log(json.dumps(row))
    meta = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "duration_s": round(time.time() - started),
        "cores": os.cpu_count(),
        "loadavg_start": load0,
        "loadavg_end": os.getloadavg(),
        "redis": redis_version(args.redis_server),
        "versions": versions(),
        "argv": sys.argv[1:],
    }
    VAR.mkdir(parents=True, exist_ok=True)
    RESULTS_FILE.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    print(json.dumps(meta))
    print(table(results, systems, sizes))
    for n in sizes:
        jc = [r for r in results if r["system"] == "jobconsole" and r["n"] == n and r.get("ok")]
        if jc:
            parts = ", ".join(f"{k.removeprefix('jc_')} {p50(jc, k):.1f}" for k in SPLIT)
            print(f"- Jobconsole N={n:,}, its (c) split, p50 ms: {parts}")
    for r in results:
        if not r.get("ok"):
            print(f"- {r['system']} N={r['n']} run {r['repeat']}: {r.get('error', 'wrong sum or members missing')}")


if __name__ == "__main__":
    main()
