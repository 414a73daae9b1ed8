"""python -m chaos.run [--quick] [--scenario NAME ...] [--seed N] [--keep] [--results FILE]

Runs each scenario against its own redis-server and worker processes, then prints its counts and a
PASS/FAIL line. Exits 1 if any scenario lost a job, let two valid leases overlap, duplicated a side effect,
re-ran a job after its ack, ran a job before its run_at, or charged an attempt for a graceful shutdown.
Every run's counts are also appended as one JSON line to --results; `python -m chaos.tally` sums them."""

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from chaos.checker import Report, check, median
from chaos.cluster import Cluster
from chaos.harness import Ctx, open_redis
from chaos.ledger import Ledger
from chaos.scenarios import SCENARIOS, Scenario
from chaos.tasks import JOB_LEASE_S
from tests.redis_server import RedisServer

GATES = (
    "lost",
    "overlaps",
    "duplicate_effects",
    "rerun_after_ack",
    "early",
    "unexpected_dead",
    "shutdown_attempts_used",
    "orphans",
    "history_defects",
    "unique_overlaps",
    "unique_refused_wrongly",
)
DEFAULT_RESULTS = Path(__file__).resolve().parent.parent / "var" / "chaos" / "runs.jsonl"


@dataclass
class Result:
    scenario: Scenario
    report: Report
    seconds: float
    tallies: dict[str, int] = field(default_factory=dict)  # the scenario's own counts (Ctx.tallies)

    @property
    def failures(self) -> list[str]:
        gates = GATES + self.scenario.extra_gates
        counts = {gate: self.tallies[gate] if gate in self.tallies else getattr(self.report, gate) for gate in gates}
        return [f"{gate}={count}" for gate, count in counts.items() if count]

    @property
    def passed(self) -> bool:
        return not self.failures


def run_scenario(
    scenario: Scenario, *, quick: bool, seed: int, root: Path, soak_seconds: float | None = None
) -> Result:
    workdir = root / scenario.name
    (workdir / "var").mkdir(parents=True)
    ledger = Ledger(workdir / "ledger.sqlite3")
    server = RedisServer(workdir / "redis", appendfsync=scenario.appendfsync).start()
    cluster = Cluster(workdir, ledger, server)
    r, client = open_redis(server.url)
    ctx = Ctx(
        scenario.name,
        quick,
        random.Random(f"{seed}:{scenario.name}"),
        workdir,
        ledger,
        server,
        cluster,
        r,
        client,
        soak_seconds=soak_seconds,
    )
    began = time.monotonic()
    try:
        scenario.run(ctx)
    except BaseException:
        server.kill()  # nothing is checked after a harness failure: leave no redis-server behind
        r.close()
        for cleanup in ctx.cleanups:
            cleanup()
        raise
    finally:
        cluster.stop_all()
    if server.proc is None:  # the scenario ended while Redis was down
        server.start()
    else:
        server.proc.send_signal(18)  # SIGCONT, in case it ended while Redis was frozen
    report = check(
        ledger,
        ctx.r,  # the scenario's own Redis, when it brought one (cluster_failover)
        cluster.stale_reports(),
        everysec=scenario.appendfsync == "everysec",
        mirror_db=cluster.mirror_db if cluster.mirrored else None,
        queues=cluster.queues,
    )
    report.notes += ctx.notes
    r.close()
    server.kill()
    for cleanup in ctx.cleanups:
        cleanup()
    return Result(scenario, report, time.monotonic() - began, ctx.tallies)


def fmt_s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def rollback_loss(rep: Report) -> str:
    """How many a rollback took before the mirror saw them, and how long the oldest had been accepted by then."""
    if rep.rollback_loss_age is None:
        return str(rep.lost_in_rollback)
    return f"{rep.lost_in_rollback} (accepted at most {rep.rollback_loss_age * 1000:.0f} ms before the power loss)"


def histories(rep: Report) -> str:
    if not rep.histories_checked:
        return "-"
    complete = rep.histories_checked - rep.history_defects
    return f"{complete} / {rep.histories_checked} ({100 * complete / rep.histories_checked:.1f}%)"


def groups(res: "Result") -> str:
    """The concurrency group's counts (group_slots only)."""
    t = res.tallies
    if "group_peak" not in t:
        return "-"
    raw = t.get("group_peak_with_zombies", t["group_peak"])
    return f"{t['group_peak']} ({raw}) / {t['group_over_limit']} / {t['group_slots_leaked']}"


def unique(rep: Report) -> str:
    return f"{rep.unique_jobs} / {rep.unique_duplicates}" if rep.unique_jobs or rep.unique_duplicates else "-"


def print_result(res: Result) -> None:
    rep = res.report
    dlq = f"{min(rep.dlq_attempts)}-{max(rep.dlq_attempts)}" if rep.dlq_attempts else "-"
    rows = [
        ("jobs accepted", rep.accepted),
        ("executions", rep.executions),
        ("lost", rep.lost),
        (
            "lost in Redis's everysec window (not gated)",
            rep.lost_in_fsync_window if res.scenario.appendfsync == "everysec" else "-",
        ),
        ("lost in a rollback before the mirror saw them (not gated)", rollback_loss(rep)),
        ("completed, then forgotten by Redis; kept by the mirror", rep.finished_in_mirror_only),
        ("dead-lettered, expected to complete", rep.unexpected_dead),
        ("overlapping valid leases", rep.overlaps),
        ("duplicate side effects", rep.duplicate_effects),
        ("side effects applied / attempted", f"{rep.effects_applied} / {rep.effect_attempts}"),
        ("re-runs after ack", rep.rerun_after_ack),
        ("runs before run_at", rep.early),
        ("attempts charged by graceful shutdown", rep.shutdown_attempts_used),
        ("group peak at once (valid leases; with zombies) / over limit / slots leaked", groups(res)),
        ("unique-key jobs accepted / duplicates", unique(rep)),
        ("jobs live at once under one unique key", rep.unique_overlaps),
        ("duplicates refused for a holder not live", rep.unique_refused_wrongly),
        (
            "recovery p50 / p99 (n)",
            f"{fmt_s(median(rep.recovery))} / {fmt_s(rep.percentile(0.99))} ({len(rep.recovery)})",
        ),
        (
            "kill or stop to re-run p50 / p99 (n)",
            f"{fmt_s(median(rep.rerun))} / {fmt_s(rep.percentile(0.99, rep.rerun))} ({len(rep.rerun)})",
        ),
        ("job lease (CHAOS_LEASE_S)", f"{JOB_LEASE_S:g}s"),
        ("overlaps incl. expired leases (zombies)", rep.wallclock_overlaps),
        ("leases lost by live workers", rep.live_worker_leases_lost),
        ("stale reports refused", rep.stale_reports),
        ("orphaned Redis entries", rep.orphans),
        ("executions with no lease in history", rep.unmatched),
        ("attempts before DLQ (poison, garbled)", dlq),
        ("attempt histories complete (flaky jobs)", histories(rep)),
    ]
    print(f"\n== {res.scenario.name}: {res.scenario.title} ({res.seconds:.1f}s)")
    for label, value in rows:
        print(f"  {label:<42} {value}")
    for note in rep.notes:
        print(f"  note: {note}")
    print(f"  {'PASS' if res.passed else 'FAIL: ' + ', '.join(res.failures)}")


def print_summary(results: list[Result]) -> None:
    print(f"\n{'scenario':<20} {'accepted':>8} {'execs':>7} {'lost':>4} {'overlap':>7} {'dup':>3} "
          f"{'p50':>7} {'p99':>7} {'rerun50':>7} {'rerun99':>7} {'time':>6}  result")  # fmt: skip
    for res in results:
        rep = res.report
        print(
            f"{res.scenario.name:<20} {rep.accepted:>8} {rep.executions:>7} {rep.lost:>4} {rep.overlaps:>7} "
            f"{rep.duplicate_effects:>3} {fmt_s(median(rep.recovery)):>7} {fmt_s(rep.percentile(0.99)):>7} "
            f"{fmt_s(median(rep.rerun)):>7} {fmt_s(rep.percentile(0.99, rep.rerun)):>7} "
            f"{res.seconds:>5.0f}s  {'PASS' if res.passed else 'FAIL'}"
        )


def print_totals(results: list[Result]) -> None:
    """Sums per scenario over several seeded runs (--runs)."""
    by_name: dict[str, list[Result]] = {}
    for res in results:
        by_name.setdefault(res.scenario.name, []).append(res)
    print(f"\n{'scenario':<20} {'runs':>4} {'passed':>6} {'accepted':>8} {'execs':>7} {'lost':>4} {'overlap':>7} "
          f"{'dup':>3}")  # fmt: skip
    for name, runs in by_name.items():
        total = {f: sum(getattr(r.report, f) for r in runs) for f in ("accepted", "executions", "lost", "overlaps")}
        dup = sum(r.report.duplicate_effects for r in runs)
        print(
            f"{name:<20} {len(runs):>4} {sum(r.passed for r in runs):>6} {total['accepted']:>8} "
            f"{total['executions']:>7} {total['lost']:>4} {total['overlaps']:>7} {dup:>3}"
        )


def result_record(res: Result, *, seed: int, quick: bool, commit: str) -> dict[str, object]:
    """One run as a JSON object: what chaos.tally sums (the counts, not the per-job lists)."""
    rep = res.report
    counts = {name: value for name, value in vars(rep).items() if isinstance(value, int)}
    return {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "scenario": res.scenario.name,
        "seed": seed,
        "quick": quick,
        "seconds": round(res.seconds, 1),
        "passed": res.passed,
        "failures": res.failures,
        **counts,
        **res.tallies,
        "rollback_loss_age": rep.rollback_loss_age,
        "recovery_n": len(rep.recovery),
        "recovery_p50": median(rep.recovery),
        "recovery_p99": rep.percentile(0.99),
        "rerun_n": len(rep.rerun),
        "rerun_p50": median(rep.rerun),
        "rerun_p99": rep.percentile(0.99, rep.rerun),
        "job_lease_s": JOB_LEASE_S,
        "notes": rep.notes,
    }


def current_commit() -> str:
    """The checkout's commit, marked '+' when it has uncommitted changes ('' outside a git checkout)."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True)  # fmt: skip
    except OSError:
        return ""
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small volumes (the version inside make test)")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="repeatable; default all")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=1, help="run each scenario this often, seeds --seed, --seed+1, ...")
    parser.add_argument("--soak-seconds", type=float, help="how long the soak scenario faults (default 150, quick 15)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, ledger, AOF)")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS,
                        help=f"append each run's counts here as a JSON line (default {DEFAULT_RESULTS})")  # fmt: skip
    args = parser.parse_args(argv)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    commit = current_commit()
    root = Path(tempfile.mkdtemp(prefix="chaos-"))
    results: list[Result] = []
    failed_dirs: list[Path] = []
    try:
        for seed in range(args.seed, args.seed + args.runs):
            for name in args.scenario or list(SCENARIOS):
                results.append(
                    run_scenario(
                        SCENARIOS[name], quick=args.quick, seed=seed, root=root / f"seed-{seed}",
                        soak_seconds=args.soak_seconds,
                    )
                )  # fmt: skip
                print_result(results[-1])
                # One unbuffered write per line: O_APPEND keeps parallel streams' lines whole.
                record = result_record(results[-1], seed=seed, quick=args.quick, commit=commit)
                with args.results.open("ab", buffering=0) as out:
                    out.write((json.dumps(record) + "\n").encode())
                # A failed run keeps its logs, ledger and AOF (one failure in hundreds of seeds must be
                # explainable); a passed one is removed at once, so long batches do not fill the disk.
                workdir = root / f"seed-{seed}" / name
                if not results[-1].passed:
                    failed_dirs.append(workdir)
                elif not args.keep:
                    shutil.rmtree(workdir, ignore_errors=True)
    finally:
        if args.keep or failed_dirs or sys.exc_info()[0] is not None:  # a harness error keeps it all too
            print(f"\nwork directory kept: {root}")
            for workdir in failed_dirs:
                print(f"  failed run: {workdir}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print_summary(results)
    if args.runs > 1:
        print_totals(results)
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
