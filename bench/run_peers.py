#!/usr/bin/env python3
"""Benchmark Jobconsole against other job queues on one private redis-server (issues 3 and 31).

Runs every peer adapter (bench/peers/<name>_bench.py) in every mode with its
own venv's python, the systems taking turns, collects their one-line JSON
results, prints a markdown table (median and min-max of the repeats, ratios
against the best peer) and writes var/bench/peers.json.  Stdlib only, so any
python3 can run it.

    bash bench/setup_peers.sh             # once; run_peers.py also calls it
    python3 bench/run_peers.py --repeat 2 --contended     # what `make bench` runs: quiet, then one busy core
    python3 bench/run_peers.py --quick --peers huey,sidekiq,jobconsole
    python3 bench/run_peers.py --payload small,1kb --database-url postgres://user@host/db   # every row, both payloads
    python3 bench/run_peers.py --jc-row 'procs=manage.py runworker --processes {processes} --no-system-worker'
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var" / "bench"
RESULTS_FILE = VAR / "peers.json"

FULL_JOBS = 20_000
QUICK_JOBS = 2_000
FULL_SAMPLES = 200
QUICK_SAMPLES = 50


@dataclass(frozen=True)
class PeerSpec:
    python: Path  # interpreter of the venv the adapter needs
    # Cap on throughput jobs for peers too slow to process the full count in
    # reasonable time; their per-job cost is steady, so fewer jobs suffice.
    max_throughput_jobs: int | None = None
    adapter: str = ""  # adapter module name when it differs from the row's name
    env: tuple[tuple[str, str], ...] = ()  # extra environment for the adapter and its workers
    plan: tuple[tuple[str, int], ...] | None = None  # (mode, workers) subset; None = the whole PLAN
    root: Path = ROOT  # the checkout whose adapter runs (another commit's, for --baseline)
    label: str = ""  # the row's name in the markdown table ({version}: the adapter's version)

    def script(self, name: str) -> Path:
        return self.root / "bench" / "peers" / f"{self.adapter or name}_bench.py"


VENV_A = VAR / "venv-a" / "bin" / "python"
VENV_B = VAR / "venv-b" / "bin" / "python"
JC_PYTHON = ROOT / ".venv" / "bin" / "python"


def jc_env(variant: str, database_url: str = "") -> tuple[tuple[str, str], ...]:
    """Jobconsole's adapter environment: which processes run (JOBCONSOLE_BENCH_VARIANT) and the database (empty:
    a fresh SQLite file). Both are always set, so that nothing in the caller's environment changes a row."""
    return (
        ("JOBCONSOLE_BENCH_VARIANT", variant),
        ("JOBCONSOLE_BENCH_DATABASE_URL", database_url),
        ("JOBCONSOLE_BENCH_MIRROR", ""),
    )


def jc_row(worker: str, service: str = "") -> tuple[tuple[str, str], ...]:
    """A Jobconsole row given as command lines (--jc-row): the worker's `manage.py ...` (with `{processes}` one
    command runs N processes, else N copies run) and the process beside it (empty: none)."""
    return (*jc_env("defaults"), ("JOBCONSOLE_BENCH_WORKER_CMD", worker), ("JOBCONSOLE_BENCH_SERVICE_CMD", service))


PEERS: dict[str, PeerSpec] = {
    # Jobconsole (bench/peers/jobconsole_bench.py, run by the project's own venv) as the Procfile ships it: its
    # worker command and one `runmirror` process, on a fresh SQLite database.
    "jobconsole": PeerSpec(
        JC_PYTHON, env=jc_env("defaults"), label="Jobconsole as the Procfile ships it (worker + `runmirror`, SQLite)"
    ),
    # The same on PostgreSQL (--database-url; the URL is filled in by main, the row skipped without one).
    "jobconsole+pg": PeerSpec(
        JC_PYTHON, adapter="jobconsole", env=jc_env("defaults"), label="Jobconsole as shipped, on PostgreSQL"
    ),
    # The engine alone: the Procfile's worker with --no-mirror and no mirror process.
    "jobconsole-engine": PeerSpec(
        JC_PYTHON, adapter="jobconsole", env=jc_env("engine"), label="Jobconsole engine alone (`--no-mirror`)"
    ),
    # A lone `runworker` as a user types it: its supervisor runs the mirror in a child process (a thread before
    # issue 31; the row keeps its name). No worker runs while jobs are enqueued, so its enqueue rates would be the
    # engine's.
    "jobconsole+thread": PeerSpec(
        JC_PYTHON,
        adapter="jobconsole",
        env=jc_env("thread"),
        plan=(("throughput", 1), ("throughput", 2), ("latency", 1)),
        label="Jobconsole, a lone `runworker` (its mirror process)",
    ),
    # Sidekiq and BullMQ (issue 31): Ruby and Node, their producers and workers in their own language; the adapter
    # that drives them runs in the project's venv (it needs redis-py only).
    "sidekiq": PeerSpec(JC_PYTHON, label="Sidekiq {version}, 10 threads"),
    "bullmq": PeerSpec(JC_PYTHON, label="BullMQ {version}, concurrency 10"),
    "huey": PeerSpec(VENV_A, label="Huey {version}"),
    "dramatiq": PeerSpec(VENV_A, label="Dramatiq {version}"),
    "celery": PeerSpec(VENV_A, label="Celery {version}"),
    # rq forks a work horse per job (~70 jobs/s on the 2-core reference
    # machine): 20,000 jobs would take 5 minutes per run.
    "rq": PeerSpec(VENV_A, max_throughput_jobs=2_000, label="RQ {version}"),
    "arq": PeerSpec(VENV_B, label="arq {version}"),
    "saq": PeerSpec(VENV_B, label="SAQ {version}"),
}
# The rows whose ratios to the best peer the run prints: the defaults (the headline) and the engine alone.
HEADLINE = ("jobconsole", "jobconsole+pg", "jobconsole-engine")
PAYLOAD_NAMES = ("130b", "none", "small", "1kb")  # bench/peers/_common.py PAYLOADS

# (mode, workers) in run order; workers=0 means "no worker" (enqueue only). --bulk adds ("enqueue_bulk", 0).
PLAN: list[tuple[str, int]] = [
    ("enqueue_single", 0),
    ("throughput", 1),
    ("throughput", 2),
    ("latency", 1),
]
VARIANTS = ("quiet", "contended")


def log(msg: str) -> None:
    print(f"[run_peers] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Private redis-server.
# --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def redis_version(server: str) -> str:
    out = subprocess.run([server, "--version"], capture_output=True, text=True).stdout
    return next((w.split("=", 1)[1] for w in out.split() if w.startswith("v=")), out.strip())


@contextmanager
def private_redis(server: str, appendfsync: str = "no-aof") -> Iterator[str]:
    """A throwaway redis-server on a free loopback port, in a temporary directory removed afterwards: no
    persistence, or AOF with the given appendfsync policy (never RDB snapshots)."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-redis-"))
    port = free_port()
    argv = [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir)]
    argv += ["--save", "", "--logfile", str(workdir / "redis.log")]
    argv += ["--appendonly", "no"] if appendfsync == "no-aof" else ["--appendonly", "yes", "--appendfsync", appendfsync]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not redis_ping(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start; see {workdir / 'redis.log'}")
            time.sleep(0.05)
        log(f"private redis-server {redis_version(server)} on 127.0.0.1:{port}")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------
# Running one adapter.
# --------------------------------------------------------------------------


def adapter_timeout(mode: str, jobs: int, samples: int) -> float:
    """Generous bound: the adapters detect stalls themselves after 60 s."""
    if mode == "latency":
        return 120 + samples * 1.5
    return 180 + jobs / 50


def kill_recorded_groups(pgid_file: Path) -> None:
    """Kill worker groups an adapter left behind when it was itself killed."""
    if not pgid_file.exists():
        return
    for line in pgid_file.read_text().split():
        try:
            os.killpg(int(line), signal.SIGKILL)
        except (ProcessLookupError, PermissionError, ValueError):
            pass


def adapter_argv(spec: PeerSpec, name: str, url: str, mode: str, workers: int, jobs: int, samples: int) -> list[str]:
    """The adapter CLI shared by every peer (and a future jobconsole_bench.py)."""
    return [
        *(str(spec.python), str(spec.script(name))),
        *("--redis-url", url, "--mode", mode, "--jobs", str(jobs)),
        *("--workers", str(max(workers, 1)), "--samples", str(samples)),
        *("--log-dir", str(VAR / "logs")),
    ]


def stop_adapter(proc: subprocess.Popen[str], pgid_file: Path) -> None:
    """SIGTERM lets the adapter stop its own workers; the pgid file is the backstop."""
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    kill_recorded_groups(pgid_file)
    pgid_file.unlink(missing_ok=True)


def run_adapter(
    name: str, spec: PeerSpec, url: str, mode: str, workers: int, jobs: int, samples: int
) -> dict[str, Any]:
    pgid_file = VAR / "run" / f"{name}-{mode}-w{workers}.pgids"
    pgid_file.parent.mkdir(parents=True, exist_ok=True)
    pgid_file.unlink(missing_ok=True)
    argv = [*adapter_argv(spec, name, url, mode, workers, jobs, samples), "--pgid-file", str(pgid_file)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env={**os.environ, **dict(spec.env)})
    try:
        stdout, _ = proc.communicate(timeout=adapter_timeout(mode, jobs, samples))
    except subprocess.TimeoutExpired:
        stop_adapter(proc, pgid_file)
        return {"peer": name, "mode": mode, "workers": workers, "ok": False, "error": "timed out"}
    except BaseException:  # interrupted: leave no adapter or worker behind
        stop_adapter(proc, pgid_file)
        raise
    if proc.returncode not in (0, 1):  # 1 = adapter reported its own failure
        kill_recorded_groups(pgid_file)
    pgid_file.unlink(missing_ok=True)
    return parse_result(name, mode, workers, stdout, proc.returncode)


def parse_result(name: str, mode: str, workers: int, stdout: str, rc: int) -> dict[str, Any]:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"peer": name, "mode": mode, "workers": workers, "ok": False, "error": f"no JSON result (exit {rc})"}
    # Named as this run knows the peer: another commit's adapter (--baseline) reports the plain name.
    return {**json.loads(lines[-1]), "peer": name}


def rate(result: dict[str, Any]) -> float:
    return float(result.get("jobs_per_s") or 0)


def compact(result: dict[str, Any]) -> dict[str, Any]:
    """One run as kept beside the summary: without its per-sample lists."""
    return {k: v for k, v in result.items() if k not in ("delays_ms", "calls_ms", "mirror_lags_ms", "rounds")}


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The repeats of one rate as one result: every figure the median of the successful runs' (the tables' spread
    comes from `rounds`, every run in turn order, failed ones included)."""
    ok = [r for r in runs if r.get("ok")]
    if not ok:
        return {**runs[-1], "rounds": [compact(r) for r in runs]}
    summary: dict[str, Any] = dict(ok[0])
    for key, value in ok[0].items():
        values = [r.get(key) for r in ok]
        if is_number(value) and all(is_number(v) for v in values) and len(set(values)) > 1:
            summary[key] = round(statistics.median(cast(list[float], values)), 3)
    summary["rounds"] = [compact(r) for r in runs]
    return summary


def run_once(name: str, spec: PeerSpec, url: str, mode: str, workers: int, jobs: int, samples: int) -> dict[str, Any]:
    t0 = time.monotonic()
    result = run_adapter(name, spec, url, mode, workers, jobs, samples)
    status = "ok" if result.get("ok") else f"FAILED: {result.get('error')}"
    if isinstance(jps := result.get("jobs_per_s"), float):
        status += f"  {jps:,.0f} jobs/s"
    if isinstance(p50 := result.get("p50_ms"), float):
        status += f"  p50 {p50:.2f} ms"
    log(f"{name:<18} {mode:<14} w{workers}  {time.monotonic() - t0:6.1f}s  {status}")
    return result


def run_step(
    names: list[str], url: str, mode: str, workers: int, jobs: int, samples: int, repeat: int
) -> list[dict[str, Any]]:
    """One rate of several peers, `repeat` runs each, summarised by their median (every run kept). The peers take
    turns run by run, so that the machine's drift (its good and bad minutes) falls on each alike, and the runs of
    one round can be compared pairwise."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for _ in range(repeat):
        for name in names:
            spec = PEERS[name]
            n = min(jobs, spec.max_throughput_jobs or jobs) if mode == "throughput" else jobs
            runs[name].append(run_once(name, spec, url, mode, workers, n, samples))
    return [median_of(r) for r in runs.values()]


def pooled_latency(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One peer's latency rounds as one result: percentiles of every sample of every round (no best-of: an
    idle pick-up's spread is what is measured), each round's p50 kept for the round-by-round comparison."""
    ok = [r for r in rounds if r.get("ok")]
    if len(ok) < len(rounds) or not ok:
        return {**next(r for r in rounds if not r.get("ok")), "rounds": [compact(r) for r in rounds]}
    delays = [d for r in ok for d in r["delays_ms"]]
    calls = [c for r in ok for c in r["calls_ms"]]
    q = statistics.quantiles(delays, n=100, method="inclusive")
    pooled: dict[str, Any] = {k: v for k, v in ok[0].items() if k not in ("delays_ms", "calls_ms", "mirror_lags_ms")}
    pooled.update(
        samples=len(delays),
        p50_ms=round(q[49], 3),
        p95_ms=round(q[94], 3),
        p99_ms=round(q[98], 3),
        max_ms=round(max(delays), 3),
        enqueue_call_p50_ms=round(statistics.median(calls), 3),
        after_call_p50_ms=round(statistics.median(d - c for d, c in zip(delays, calls, strict=True)), 3),
        redis_cpu_us_per_pickup=round(statistics.fmean(r["redis_cpu_us_per_pickup"] for r in ok), 1),
        round_p50_ms=[r["p50_ms"] for r in ok],
        rounds=[compact(r) for r in rounds],
    )
    if all(r.get("mirror_lags_ms") for r in ok):  # the mirror's lag, every round's jobs pooled too
        lags = [v for r in ok for v in r["mirror_lags_ms"]]
        lq = statistics.quantiles(lags, n=100, method="inclusive")
        pooled.update(
            mirror_lag_p50_ms=round(lq[49], 1),
            mirror_lag_p99_ms=round(lq[98], 1),
            mirror_lag_max_ms=round(max(lags), 1),
            mirror_last_commit_ms=max(r["mirror_last_commit_ms"] for r in ok),
            service_cpu_ms_per_job=ok[0].get("service_cpu_ms_per_job")
            and round(statistics.fmean(r["service_cpu_ms_per_job"] for r in ok), 3),
        )
    return pooled


def run_latency_rounds(peers: list[str], url: str, samples: int, rounds: int) -> list[dict[str, Any]]:
    """Idle pick-up, the peers taking turns round by round, so that the VM's drift (and its good and bad
    minutes) fall on every system alike; each peer's rounds are then pooled."""
    measured = [n for n in peers if ("latency", 1) in (PEERS[n].plan or PLAN)]
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in measured}
    for _ in range(rounds):
        for name in measured:
            runs[name].append(run_once(name, PEERS[name], url, "latency", 1, 1, samples))
    return [pooled_latency(runs[n]) for n in measured]


def run_all(
    peers: list[str], url: str, jobs: int, samples: int, repeat: int, latency_rounds: int
) -> list[dict[str, Any]]:
    """Measure by measurement, every system back to back: a VM whose speed drifts over a run (this one
    does, by a third) then shifts each column as a whole instead of favouring whoever runs first."""
    results = []
    for mode, workers in PLAN:
        if mode == "latency":
            results.extend(run_latency_rounds(peers, url, samples, latency_rounds))
            continue
        names = [name for name in peers if (mode, workers) in (PEERS[name].plan or PLAN)]
        results.extend(run_step(names, url, mode, workers, jobs, samples, repeat))
    return results


# --------------------------------------------------------------------------
# The markdown tables (docs/benchmarks.md): median and min-max of the runs, ratios against the best peer.
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One figure of a run: the sum of `fields` of the (mode, workers) result, times `scale`."""

    header: str
    mode: str
    workers: int
    fields: tuple[str, ...]
    higher_is_better: bool
    digits: int
    unit: str
    scale: float = 1.0


REDIS_PHASES = ("enqueue_redis_cpu_us_per_job", "drain_redis_cpu_us_per_job")  # enqueue + drain, summed
CELLS = {
    "drain1": Cell("1 process", "throughput", 1, ("jobs_per_s",), True, 0, "/s"),
    "drain2": Cell("2 processes", "throughput", 2, ("jobs_per_s",), True, 0, "/s"),
    "enqueue": Cell("enqueue one by one", "enqueue_single", 0, ("jobs_per_s",), True, 0, "/s"),
    "producer": Cell(
        "producer CPU per enqueue", "enqueue_single", 0, ("producer_cpu_us_per_enqueue",), False, 0, " µs"
    ),
    "p50": Cell("idle pick-up p50", "latency", 1, ("p50_ms",), False, 2, " ms"),
    "p99": Cell("idle pick-up p99", "latency", 1, ("p99_ms",), False, 1, " ms"),
    "redis_enqueue": Cell("Redis CPU per enqueue", "throughput", 1, ("enqueue_redis_cpu_us_per_job",), False, 0, " µs"),
    "redis_drain": Cell("Redis CPU per job drained", "throughput", 1, ("drain_redis_cpu_us_per_job",), False, 0, " µs"),
    "redis": Cell("Redis CPU per job", "throughput", 1, REDIS_PHASES, False, 0, " µs"),
    "worker": Cell(
        "worker CPU per job (1 process)", "throughput", 1, ("steady_worker_cpu_ms_per_job",), False, 0, " µs", 1000
    ),
}
DASH = "\N{EN DASH}"  # min-max in the tables
RATIO_CELLS = ("drain1", "drain2", "enqueue", "producer", "p50", "p99", "redis", "worker")


def round_values(results: list[dict[str, Any]], peer: str, cell: Cell) -> list[float | None]:
    """The cell's figure in each run, in turn order (None where the run failed or has no such figure)."""
    summary = pick(results, peer, cell.mode, cell.workers)
    values: list[float | None] = []
    for run in summary.get("rounds") or ([summary] if summary else []):
        figures = [run.get(f) for f in cell.fields]
        ok = run.get("ok") and all(is_number(v) for v in figures)
        values.append(sum(cast(list[float], figures)) * cell.scale if ok else None)
    return values


def spread(values: list[float | None], digits: int) -> str:
    """median (min-max) of the runs that have a value."""
    have = [v for v in values if v is not None]
    if not have:
        return "-"
    median = fmt(statistics.median(have), digits)
    if len(have) == 1:
        return median
    return f"{median} ({fmt(min(have), digits)}{DASH}{fmt(max(have), digits)})"


def label(results: list[dict[str, Any]], peer: str) -> str:
    version = next((r["version"] for r in results if r.get("peer") == peer and r.get("version")), "?")
    return (PEERS[peer].label or peer).format(version=version) if peer in PEERS else peer


def markdown_table(results: list[dict[str, Any]], peers: list[str], title: str) -> str:
    def cell(peer: str, key: str) -> str:
        c = CELLS[key]
        text = spread(round_values(results, peer, c), c.digits)
        return text if text == "-" else text + c.unit

    header = [
        title, "1 worker process", "2 processes", "enqueue one by one", "producer CPU per enqueue",
        "idle pick-up p50 / p99", "Redis CPU per job: enqueue + drain", "worker CPU per job (1 process)",
    ]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for peer in peers:
        pickup = f"{spread(round_values(results, peer, CELLS['p50']), 2)} / {cell(peer, 'p99')}"
        redis = f"{spread(round_values(results, peer, CELLS['redis_enqueue']), 0)} + {cell(peer, 'redis_drain')}"
        row = [
            label(results, peer), cell(peer, "drain1"), cell(peer, "drain2"), cell(peer, "enqueue"),
            cell(peer, "producer"), pickup, redis, cell(peer, "worker"),
        ]  # fmt: skip
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def paired_ratios(mine: list[float | None], theirs: list[float | None], higher_is_better: bool) -> list[float | None]:
    """Run by run (the systems took turns, so run i of each was measured in the same minutes): > 1 = ours better."""
    out: list[float | None] = []
    for a, b in zip(mine, theirs, strict=False):
        if a is None or b is None or not a or not b:
            out.append(None)
        else:
            out.append(a / b if higher_is_better else b / a)
    return out


def ratio_text(ratios: list[float | None], peer: str) -> str:
    have = [r for r in ratios if r is not None]
    if not have:
        return "-"
    text = f"{statistics.median(have):.2f}x"
    if len(have) > 1:
        text += f" ({min(have):.2f}{DASH}{max(have):.2f})"
    return f"{text} vs {peer}"


def ratio_table(results: list[dict[str, Any]], peers: list[str]) -> str:
    """Each Jobconsole row against the peer with the best median of each figure, the ratio taken run by run."""
    ours = [p for p in peers if not is_peer(p)]
    others = [p for p in peers if is_peer(p)]
    if not ours or not others:
        return ""
    header = ["Jobconsole against the best peer (> 1x: Jobconsole better)", *(CELLS[k].header for k in RATIO_CELLS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for mine in ours:
        row = [label(results, mine)]
        for key in RATIO_CELLS:
            c = CELLS[key]
            candidates = []
            for peer in others:
                have = [v for v in round_values(results, peer, c) if v is not None]
                if have:
                    candidates.append((statistics.median(have), peer))
            if not candidates:
                row.append("-")
                continue
            _, best = max(candidates) if c.higher_is_better else min(candidates)
            ratios = paired_ratios(round_values(results, mine, c), round_values(results, best, c), c.higher_is_better)
            row.append(ratio_text(ratios, best))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def commands(results: list[dict[str, Any]], peers: list[str]) -> str:
    """What ran for each row (from the adapters' configs), under the tables."""
    lines = []
    for peer in peers:
        config = pick(results, peer, "throughput", 1).get("config") or {}
        if config.get("worker_cmd"):
            extra = f"; mirror: {config['mirror']}" if config.get("mirror") else ""
            lines.append(f"- {peer}: `{config['worker_cmd']}`{extra}")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Reporting.
# --------------------------------------------------------------------------


def pick(results: list[dict[str, Any]], peer: str, mode: str, workers: int) -> dict[str, Any]:
    for r in results:
        if r.get("peer") == peer and r.get("mode") == mode and r.get("workers") == workers:
            return r
    return {}


def fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


TABLE_COLUMNS = [
    # header, mode, workers, field, digits
    ("thru 1w/s", "throughput", 1, "jobs_per_s", 0),
    ("thru 2w/s", "throughput", 2, "jobs_per_s", 0),
    ("enq 1-by-1/s", "enqueue_single", 0, "jobs_per_s", 0),
    ("enq bulk/s", "enqueue_bulk", 0, "jobs_per_s", 0),
    ("p50 ms", "latency", 1, "p50_ms", 2),
    ("p95 ms", "latency", 1, "p95_ms", 2),
    ("p99 ms", "latency", 1, "p99_ms", 2),
    ("redis µs/job", "throughput", 1, "steady_redis_cpu_us_per_job", 0),
    ("redis µs/enq", "enqueue_single", 0, "redis_cpu_us_per_enqueue", 0),
    ("lag p50 ms", "throughput", 1, "mirror_lag_p50_ms", 0),
    ("lag p99 ms", "throughput", 1, "mirror_lag_p99_ms", 0),
    ("cmds/job", "throughput", 1, "redis_cmds_per_job", 1),
    ("cpu ms/job", "throughput", 1, "steady_worker_cpu_ms_per_job", 3),
]


def format_row(cells: list[str], widths: list[int]) -> str:
    """Peer name left-aligned, figures right-aligned."""
    padded = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
    return "  ".join(padded)


def table(results: list[dict[str, Any]], peers: list[str]) -> str:
    header = ["peer", *(c[0] for c in TABLE_COLUMNS)]
    rows = [header]
    for peer in peers:
        row = [peer]
        for _, mode, workers, field, digits in TABLE_COLUMNS:
            r = pick(results, peer, mode, workers)
            row.append(fmt(r.get(field), digits) if r.get("ok") else ("ERR" if r else "-"))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [format_row(r, widths) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def is_peer(name: str) -> bool:
    """A system Jobconsole is compared with (not one of its own rows, nor a baseline's)."""
    return not name.startswith("jobconsole")


def scaling(results: list[dict[str, Any]], peers: list[str]) -> str:
    """Two worker processes against one, beside the cores each run kept busy (workers + Redis, measured over
    the same steady-state window as the rate). Jobs per busy core-second that hold from 1 to 2 workers mean
    no contention between the processes: throughput then grows with the CPU the workers get, and a system
    whose one worker already keeps more than one core busy cannot double on a machine with few cores."""
    cores = os.cpu_count() or 1
    lines = [
        f"scaling from 1 to 2 worker processes ({cores} cores; busy = cores kept busy by workers + Redis; "
        "per core = jobs per busy core-second):"
    ]
    for peer in peers:
        one, two = pick(results, peer, "throughput", 1), pick(results, peer, "throughput", 2)
        if not (one.get("ok") and two.get("ok") and one.get("jobs_per_s") and two.get("jobs_per_s")):
            continue
        line = f"  {peer:<18} 2w/1w {two['jobs_per_s'] / one['jobs_per_s']:5.2f}x"
        busy1, busy2 = one.get("busy_cores"), two.get("busy_cores")
        if busy1 and busy2:
            per1, per2 = one["jobs_per_s"] / busy1, two["jobs_per_s"] / busy2
            line += (
                f"   busy {busy1:4.2f} -> {busy2:4.2f} of {cores}"
                f"   per core {per1:7,.0f} -> {per2:7,.0f} ({per2 / per1:4.2f}x)"
            )
        lines.append(line)
    return "\n".join(lines) if len(lines) > 1 else ""


def pickup_path(results: list[dict[str, Any]], peers: list[str]) -> str:
    """Where the idle pick-up goes: when the producer's enqueue call returns (its own work plus the round trip
    in which Redis runs the enqueue) against when the task starts (the worker is woken by the same Redis
    event loop turn, so it may start before the producer's call has returned: a negative gap), beside the
    Redis CPU per sample (the enqueue, the pick-up and ack, the harness's sample; idle time included)."""
    lines = ["idle pick-up path, medians in ms (gap = task start - call return):"]
    for peer in peers:
        r = pick(results, peer, "latency", 1)
        if not r.get("ok") or r.get("enqueue_call_p50_ms") is None:
            continue
        lines.append(
            f"  {peer:<18} enqueue call returns {r['enqueue_call_p50_ms']:5.2f}   task starts {r['p50_ms']:5.2f}"
            f"   gap {r['after_call_p50_ms']:+5.2f}   Redis CPU per sample {r['redis_cpu_us_per_pickup']:6.1f} µs"
        )
    return "\n".join(lines) if len(lines) > 1 else ""


def mirror_lag(results: list[dict[str, Any]], peers: list[str]) -> str:
    """The database mirror's lag per job (synced_at - finished_at: when the mirror read the job's final state, its
    commit following in the same batch), the last job's finish to the moment every row was seen committed, and
    the mirror process's CPU per job (enqueue and drain events; in the latency run, the idle gaps too)."""
    lines = [
        "database mirror after each run, ms (lag = synced_at - finished_at per job; last commit = the last job's "
        "finish to every row seen committed; mirror CPU = runmirror's CPU per job):"
    ]
    for peer in peers:
        for mode, workers, label in (
            ("throughput", 1, "1 worker"),
            ("throughput", 2, "2 workers"),
            ("latency", 1, "idle"),
        ):
            r = pick(results, peer, mode, workers)
            if not r.get("ok") or r.get("mirror_lag_p50_ms") is None:
                continue
            line = (
                f"  {peer:<18} {label:<9}  lag p50 {r['mirror_lag_p50_ms']:7.1f}  p99 {r['mirror_lag_p99_ms']:7.1f}"
                f"  max {r['mirror_lag_max_ms']:7.1f}   last commit {r['mirror_last_commit_ms']:7.1f}"
            )
            if (cpu := r.get("service_cpu_ms_per_job")) is not None:
                line += f"   mirror CPU {cpu:6.3f} ms/job"
            lines.append(line)
    return "\n".join(lines) if len(lines) > 1 else ""


def write_results(results: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    RESULTS_FILE.parent.mkdir(parents=True, exist_ok=True)
    ignore = RESULTS_FILE.parent / ".gitignore"
    if not ignore.exists():  # var/bench holds generated files only
        ignore.write_text("*\n")
    RESULTS_FILE.write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    log(f"wrote {RESULTS_FILE.relative_to(ROOT)}")


# --------------------------------------------------------------------------
# Main.
# --------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--peers", help=f"comma list (default: all available of {','.join(PEERS)})")
    p.add_argument("--jobs", type=int, help=f"jobs per enqueue/throughput run (default {FULL_JOBS})")
    p.add_argument("--samples", type=int, help=f"latency samples (default {FULL_SAMPLES})")
    p.add_argument("--quick", action="store_true", help=f"{QUICK_JOBS} jobs and {QUICK_SAMPLES} latency samples")
    p.add_argument(
        "--repeat", type=int, default=1,
        help="runs of each measurement, the systems taking turns; tables give the median and min-max",
    )  # fmt: skip
    p.add_argument(
        "--contended", action="store_true",
        help="after the quiet run, the same again with one CPU-bound process pinned to one core throughout",
    )  # fmt: skip
    p.add_argument("--bulk", action="store_true", help="also measure each system's bulk enqueue")
    p.add_argument("--report", metavar="PEERS_JSON", help="print the tables of an earlier peers.json; run nothing")
    p.add_argument(
        "--jc-row", action="append", default=[], metavar="NAME=WORKER[;SERVICE]",
        help="an extra Jobconsole row 'jobconsole-NAME' given as command lines: the worker's `manage.py ...` "
        "({processes}: it runs N processes itself, else N copies run) and the process beside it, e.g. "
        "'procs=manage.py runworker --processes {processes} --no-system-worker'",
    )  # fmt: skip
    p.add_argument(
        "--latency-rounds", type=int,
        help="latency runs of each peer, taking turns; all their samples are pooled (default: --repeat)",
    )  # fmt: skip
    p.add_argument(
        "--payload", default="130b",
        help=f"the jobs' parameters, the same for every system: {'|'.join(PAYLOAD_NAMES)}, or a comma list to "
        "measure each in turn (default: 130b, issue 31's dict of about 130 bytes)",
    )  # fmt: skip
    p.add_argument(
        "--database-url", default=os.environ.get("BENCH_DATABASE_URL", ""),
        help="PostgreSQL for the jobconsole+pg row; it is migrated and FLUSHED before every run "
        "(default: $BENCH_DATABASE_URL; without one the row is skipped)",
    )  # fmt: skip
    p.add_argument("--redis-url", help="use this Redis instead of a private one (it gets FLUSHALLed!)")
    p.add_argument("--redis-server", default=shutil.which("redis-server") or "/usr/bin/redis-server")
    p.add_argument("--no-setup", action="store_true", help="do not run bench/setup_peers.sh first")
    p.add_argument(
        "--baseline", metavar="REF",
        help="also run Jobconsole as of this commit (rows 'jobconsole@<sha>'), for a before/after in one run",
    )  # fmt: skip
    p.add_argument(
        "--appendfsync", choices=["no-aof", "everysec", "always"], default="no-aof",
        help="persistence of the private redis-server (default: none)",
    )  # fmt: skip
    return p.parse_args()


def parse_payloads(arg: str) -> list[str]:
    names = list(dict.fromkeys(n.strip() for n in arg.split(",") if n.strip()))
    unknown = [n for n in names if n not in PAYLOAD_NAMES]
    if unknown or not names:
        sys.exit(f"--payload: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(PAYLOAD_NAMES)}")
    return names


def add_baseline(ref: str) -> tuple[list[str], list[str]]:
    """Rows running another commit's Jobconsole (its files unpacked under var/bench/, this checkout's venv), and
    notes on what that commit's adapter cannot measure."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = VAR / f"baseline-{sha}"
    if not tree.exists():
        # Unpacked beside it and renamed, so that an interrupted unpack is never taken for a whole tree.
        VAR.mkdir(parents=True, exist_ok=True)  # --no-setup: the peers' set-up has not made it
        partial = Path(tempfile.mkdtemp(prefix=f"baseline-{sha}-", dir=VAR))
        archive = subprocess.run(["git", "archive", sha], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(partial)], input=archive, check=True)
        partial.rename(tree)
        log(f"unpacked {ref} ({sha}) into {tree.relative_to(ROOT)}")
    adapter = tree / "bench" / "peers" / "jobconsole_bench.py"
    common = tree / "bench" / "peers" / "_common.py"
    if "JOBCONSOLE_BENCH_VARIANT" in adapter.read_text():  # an adapter of this one's kind: every row maps
        rows = {name: PEERS[name] for name in ("jobconsole", "jobconsole+pg", "jobconsole-engine", "jobconsole+thread")}
        notes = []
    else:
        # Older adapters know one switch, JOBCONSOLE_BENCH_MIRROR=1: the mirror in a thread of the workers.
        rows = {
            "jobconsole-engine": replace(PEERS["jobconsole-engine"], env=()),
            "jobconsole+thread": replace(PEERS["jobconsole+thread"], env=(("JOBCONSOLE_BENCH_MIRROR", "1"),)),
        }
        notes = [
            f"baseline {sha}: its adapter knows only JOBCONSOLE_BENCH_MIRROR, so it has no jobconsole@{sha} or "
            f"jobconsole+pg@{sha} row (no mirror process); jobconsole-engine@{sha} is its plain row (its worker "
            f"with --concurrency 10, the mirror off) and jobconsole+thread@{sha} its mirror row (the mirror in the "
            "workers, SQLite), reporting no mirror lag"
        ]
    if "BENCH_PAYLOAD" not in common.read_text():
        notes.append(f"baseline {sha}: its adapter ignores --payload (its jobs carry no parameters)")
    names = []
    for name, spec in rows.items():
        PEERS[f"{name}@{sha}"] = replace(spec, root=tree, adapter="jobconsole")
        names.append(f"{name}@{sha}")
    return names, notes


def select_peers(arg: str | None) -> list[str]:
    if arg:
        names = [n.strip() for n in arg.split(",") if n.strip()]
        unknown = [n for n in names if n not in PEERS]
        if unknown:
            sys.exit(f"unknown peer(s): {', '.join(unknown)}; known: {', '.join(PEERS)}")
        return names
    available = [n for n, s in PEERS.items() if s.script(n).exists()]
    for n in PEERS.keys() - set(available):
        log(f"skipping {n}: {PEERS[n].script(n).relative_to(ROOT)} does not exist yet")
    return available


def use_database(peers: list[str], url: str) -> list[str]:
    """Point the +pg rows at `url`, or drop them (with a note) when there is none."""
    pg = [n for n in peers if n.split("@")[0] == "jobconsole+pg"]
    if not url:
        for name in pg:
            log(f"skipping {name}: no PostgreSQL given (--database-url or BENCH_DATABASE_URL)")
        return [n for n in peers if n not in pg]
    for name in pg:
        env = dict(PEERS[name].env)
        env["JOBCONSOLE_BENCH_DATABASE_URL"] = url
        PEERS[name] = replace(PEERS[name], env=tuple(env.items()))
    return peers


def foreign_runtime_missing(name: str) -> str:
    """What a peer in another language lacks here ('' when it can run)."""
    if name == "sidekiq" and not shutil.which("sidekiq"):
        return "no sidekiq command (Debian: ruby-sidekiq; bench/setup_peers.sh installs it)"
    if name == "bullmq" and not (shutil.which("node") and (VAR / "node" / "node_modules" / "bullmq").exists()):
        return "no node or no var/bench/node/node_modules/bullmq (bench/setup_peers.sh: npm ci)"
    return ""


def ensure_ready(peers: list[str], no_setup: bool, explicit: bool) -> list[str]:
    """Set the peers up (bench/setup_peers.sh) and return those that can run: a peer named with --peers that
    cannot is an error, one of the default set is skipped with a note."""
    if not no_setup and any(PEERS[n].python in (VENV_A, VENV_B) or n in ("sidekiq", "bullmq") for n in peers):
        subprocess.run(["bash", str(ROOT / "bench" / "setup_peers.sh")], check=True)
    missing = [n for n in peers if not PEERS[n].python.exists() or not PEERS[n].script(n).exists()]
    if missing:
        sys.exit(f"not runnable (missing venv or adapter): {', '.join(missing)}")
    lacking = {n: why for n in peers if (why := foreign_runtime_missing(n))}
    if lacking and explicit:
        sys.exit("not runnable: " + "; ".join(f"{n}: {why}" for n, why in lacking.items()))
    for name, why in lacking.items():
        log(f"skipping {name}: {why}")
    return [n for n in peers if n not in lacking]


def footer(peers: list[str], jobs: int, samples: int, repeat: int, latency_rounds: int, duration_s: float) -> str:
    caps = [f"{n} {c:,}" for n in peers if (c := PEERS[n].max_throughput_jobs) and c < jobs]
    return (
        f"{jobs:,} jobs per run (throughput capped: {', '.join(caps) or 'none'}; median of {repeat}), "
        f"{samples} latency samples x {latency_rounds} rounds, {duration_s:.0f}s total. "
        "cmds/job = Redis commands per job for enqueue + 1-worker processing, harness bookkeeping excluded; "
        "redis µs/job = Redis CPU per job while 1 worker drains (steady window; the markdown table's drain figure "
        "is the whole phase, the mirror's catching up included); redis µs/enq = Redis CPU per "
        "job of the one-by-one enqueue; lag = the mirror's synced_at - finished_at (1 worker); "
        "cpu ms/job = 1-worker process CPU per job over the measured window (the mirror process's included); "
        "enq bulk '-' = the peer has no bulk enqueue API (reason in peers.json)."
    )


@contextmanager
def external_redis(url: str) -> Iterator[str]:
    log(f"using {url} (it will be FLUSHALLed before every run)")
    yield url


def exit_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so adapters and redis-server get stopped."""

    def handler(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def payload_header(payload: str, results: list[dict[str, Any]]) -> str:
    size = next((r["payload_bytes"] for r in results if r.get("payload_bytes") is not None), None)
    ignored = sorted({r["peer"] for r in results if r.get("payload_ignored")})
    line = f"=== payload: {payload}" + (f" ({size} bytes of JSON a job)" if size is not None else "")
    if ignored:
        line += f"; without parameters (the adapter predates --payload): {', '.join(ignored)}"
    return line + " ==="


def report(results: list[dict[str, Any]], peers: list[str], title: str) -> None:
    """The markdown tables first (docs/benchmarks.md takes them as they are), then the details."""
    sections = (
        markdown_table(results, peers, title),
        ratio_table(results, peers),
        commands(results, peers),
        "Details (medians of the runs):\n\n" + table(results, peers),
        scaling(results, peers),
        pickup_path(results, peers),
        mirror_lag(results, peers),
    )
    for section in sections:
        if section:
            print(section)
            print()


def add_jc_rows(specs: list[str]) -> list[str]:
    names = []
    for spec in specs:
        name, sep, lines = spec.partition("=")
        worker, _, service = lines.partition(";")
        if not sep or not name.strip() or not worker.strip():
            sys.exit(f"--jc-row {spec!r}: expected NAME=WORKER COMMAND[;SERVICE COMMAND]")
        row = f"jobconsole-{name.strip()}"
        label_text = f"Jobconsole: `{worker.strip()}`" + (f" + `{service.strip()}`" if service.strip() else "")
        env = jc_row(worker.strip(), service.strip())
        PEERS[row] = PeerSpec(JC_PYTHON, adapter="jobconsole", env=env, label=label_text)
        names.append(row)
    return names


def uptime() -> str:
    """The load when a table was measured (the machine may be shared): `uptime`'s line, or /proc/loadavg."""
    out = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return out or Path("/proc/loadavg").read_text().strip()


@contextmanager
def contender(enabled: bool) -> Iterator[str]:
    """The contended variant: one CPU-bound process (a Python busy loop) pinned to the last core for the whole pass,
    the same for every system, as a web server or another service beside the workers would be."""
    if not enabled:
        yield "none"
        return
    core = max(os.sched_getaffinity(0))
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
    try:
        os.sched_setaffinity(proc.pid, {core})
        log(f"contender: busy loop pid {proc.pid} pinned to CPU {core}")
        yield f"one CPU-bound process (a Python busy loop) pinned to CPU {core}"
    finally:
        proc.kill()
        proc.wait()


def main() -> int:
    args = parse_args()
    if args.report:
        saved = json.loads(Path(args.report).read_text())
        print_report(saved["results"], saved["meta"])
        return 0
    exit_on_sigterm()
    jobs = args.jobs or (QUICK_JOBS if args.quick else FULL_JOBS)
    samples = args.samples or (QUICK_SAMPLES if args.quick else FULL_SAMPLES)
    latency_rounds = args.latency_rounds or args.repeat
    payloads = parse_payloads(args.payload)
    if args.bulk:
        PLAN.insert(1, ("enqueue_bulk", 0))
    extra = add_jc_rows(args.jc_row)
    baseline, notes = add_baseline(args.baseline) if args.baseline else ([], [])
    peers = select_peers(args.peers)
    peers = list(dict.fromkeys([*peers, *extra, *(n for n in baseline if n.split("@")[0] in peers)]))
    peers = use_database(peers, args.database_url)
    for note in notes:
        log(note)
    peers = ensure_ready(peers, args.no_setup, explicit=bool(args.peers))
    variants = ["quiet", "contended"] if args.contended else ["quiet"]
    command = shlex.join(["bench/run_peers.py", *sys.argv[1:]])
    meta: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": command,
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "jobs": jobs,
        "latency_samples": samples,
        "repeats": args.repeat,
        "latency_rounds": latency_rounds,
        "payloads": payloads,
        "variants": variants,
        "peers": peers,
        "redis": args.redis_url or f"private redis-server {redis_version(args.redis_server)} ({args.appendfsync})",
        "notes": notes,
        "uptime": {},
    }
    t0 = time.monotonic()
    by_pass: dict[tuple[str, str], list[dict[str, Any]]] = {}
    redis_ctx = external_redis(args.redis_url) if args.redis_url else private_redis(args.redis_server, args.appendfsync)
    with redis_ctx as url:
        for variant in variants:
            with contender(variant == "contended") as contention:
                meta[f"{variant}_contention"] = contention
                for payload in payloads:
                    key = f"{variant}/{payload}"
                    meta["uptime"][f"{key} start"] = uptime()
                    log(f"{variant}, payload {payload}; {meta['uptime'][f'{key} start']}")
                    os.environ["BENCH_PAYLOAD"] = payload  # every adapter and its workers inherit it
                    results = run_all(peers, url, jobs, samples, args.repeat, latency_rounds)
                    for r in results:
                        if r.get("ok") and r.get("payload") is None:  # an older adapter (--baseline)
                            r["payload_ignored"] = True
                        r.update(payload=payload, variant=variant)
                    by_pass[(variant, payload)] = results
                    meta["uptime"][f"{key} end"] = uptime()
                    meta["duration_s"] = round(time.monotonic() - t0, 1)
                    write_results([r for rs in by_pass.values() for r in rs], meta)  # kept if a later pass fails
    meta["duration_s"] = round(time.monotonic() - t0, 1)
    everything = [r for results in by_pass.values() for r in results]
    write_results(everything, meta)
    print_report(everything, meta)
    return 0 if all(r.get("ok") for r in everything) else 1


def print_report(everything: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    """Every pass's tables, from the results as run (or as read back from peers.json with --report)."""
    peers, repeat = meta["peers"], meta["repeats"]
    print(f"Command: `{meta['command']}` ({meta['redis']}, {meta['jobs']:,} jobs a run, ", end="")
    print(f"{meta['latency_samples']} pick-up samples a round)")
    print(f"Machine: {meta['host']}, {meta['cpus']} CPUs, {meta['platform']}; started {meta['started']}")
    by_pass: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in everything:
        by_pass.setdefault((r.get("variant", "quiet"), r["payload"]), []).append(r)
    for (variant, payload), results in by_pass.items():
        print()
        print(payload_header(payload, results).replace("===", f"=== {variant}:", 1))
        load = meta["uptime"]
        print(f"load: {load.get(f'{variant}/{payload} start')} (start); {load.get(f'{variant}/{payload} end')} (end)")
        if variant == "contended":
            print(f"contention: {meta['contended_contention']}")
        print()
        runs = f"median (min{DASH}max) of {repeat} runs" if repeat > 1 else "1 run"
        report(results, peers, f"{variant.capitalize()}, {meta['started'][:10]}, {runs}")
    for note in meta["notes"]:
        print(f"note: {note}")
    print(footer(peers, meta["jobs"], meta["latency_samples"], repeat, meta["latency_rounds"], meta["duration_s"]))


if __name__ == "__main__":
    sys.exit(main())
