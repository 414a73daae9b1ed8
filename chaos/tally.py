"""python -m chaos.tally [FILE ...] [--since ISO-TIME] [--commit PREFIX] [--quick | --full]

Sums the runs that `python -m chaos.run` appended to its results file (default var/chaos/runs.jsonl), per
scenario: how often each ran and passed, the jobs, and every gated count. Several streams of chaos.run may
write one file at once (each line is one append). Lists each failed run's scenario, seed and commit.
Exits 1 when a selected run failed."""

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from chaos.run import DEFAULT_RESULTS, GATES

SUMMED = ("accepted", "executions", "lost", "lost_in_rollback", "finished_in_mirror_only", *GATES[1:])
SCENARIO_COUNTS = ("forgotten_by_redis", "restored_by_mirror")  # power_loss's own (Ctx.tallies)


@dataclass
class Tally:
    runs: int = 0
    passed: int = 0
    sums: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SUMMED + SCENARIO_COUNTS, 0))
    worst_recovery_p99: float | None = None

    def add(self, run: dict[str, object]) -> None:
        self.runs += 1
        self.passed += bool(run["passed"])
        for name in self.sums:
            self.sums[name] += int(run.get(name) or 0)  # type: ignore[call-overload]
        p99 = run.get("recovery_p99")
        if isinstance(p99, int | float) and (self.worst_recovery_p99 is None or p99 > self.worst_recovery_p99):
            self.worst_recovery_p99 = float(p99)

    def merge(self, other: "Tally") -> None:
        self.runs += other.runs
        self.passed += other.passed
        for name, n in other.sums.items():
            self.sums[name] += n


def read_runs(paths: Iterable[Path]) -> Iterator[dict[str, object]]:
    for path in paths:
        with path.open() as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:  # a line cut short by a killed run: say so, skip it
                    print(f"{path}:{number}: skipped, not JSON ({exc})", file=sys.stderr)


def select(
    runs: Iterable[dict[str, object]], *, since: str | None, commit: str | None, quick: bool | None
) -> Iterator[dict[str, object]]:
    for run in runs:
        if since is not None and str(run["at"]) < since:
            continue
        if commit is not None and not str(run["commit"]).startswith(commit):
            continue
        if quick is not None and bool(run["quick"]) != quick:
            continue
        yield run


def tally(runs: Iterable[dict[str, object]]) -> tuple[dict[str, Tally], list[dict[str, object]]]:
    by_scenario: dict[str, Tally] = {}
    failed: list[dict[str, object]] = []
    for run in runs:
        by_scenario.setdefault(str(run["scenario"]), Tally()).add(run)
        if not run["passed"]:
            failed.append(run)
    return by_scenario, failed


def print_tally(by_scenario: dict[str, Tally], failed: list[dict[str, object]]) -> None:
    columns = ("accepted", "executions", "lost", "overlaps", "duplicate_effects", "lost_in_rollback")
    heads = ("accepted", "execs", "lost", "overlap", "dup", "rollback")
    print(f"{'scenario':<20} {'runs':>5} {'passed':>6} " + " ".join(f"{h:>9}" for h in heads) + f" {'p99 max':>8}")
    total = Tally()
    for name in sorted(by_scenario):
        t = by_scenario[name]
        worst = "-" if t.worst_recovery_p99 is None else f"{t.worst_recovery_p99:.2f}s"
        print(f"{name:<20} {t.runs:>5} {t.passed:>6} " + " ".join(f"{t.sums[c]:>9}" for c in columns) + f" {worst:>8}")
        total.merge(t)
    print(f"{'all':<20} {total.runs:>5} {total.passed:>6} " + " ".join(f"{total.sums[c]:>9}" for c in columns))
    others = [g for g in GATES if g not in columns and total.sums[g]]
    print("other gates: " + (", ".join(f"{g}={total.sums[g]}" for g in others) if others else "all 0"))
    for name in sorted(by_scenario):
        own = {c: n for c, n in by_scenario[name].sums.items() if c in SCENARIO_COUNTS}
        if any(own.values()):
            print(f"{name}: " + ", ".join(f"{c.replace('_', ' ')} {n}" for c, n in own.items()))
    for run in failed:
        failures = ", ".join(map(str, run["failures"]))  # type: ignore[call-overload]
        print(f"FAILED {run['scenario']} seed {run['seed']} at {run['at']} ({run['commit']}): {failures}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, default=[DEFAULT_RESULTS])
    parser.add_argument("--since", help="only runs that ended at or after this UTC time (e.g. 2026-11-24T07:00)")
    parser.add_argument("--commit", help="only runs of commits starting with this")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="quick", action="store_const", const=True, help="only quick runs")
    size.add_argument("--full", dest="quick", action="store_const", const=False, help="only full-size runs")
    args = parser.parse_args(argv)
    by_scenario, failed = tally(select(read_runs(args.files), since=args.since, commit=args.commit, quick=args.quick))
    if not by_scenario:
        print("no runs selected")
        return 1
    print_tally(by_scenario, failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
