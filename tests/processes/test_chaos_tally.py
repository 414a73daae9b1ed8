"""chaos.run's results lines and chaos.tally's sums over them (runs from several streams in one file)."""

import json
from pathlib import Path

import pytest

from chaos import tally
from chaos.checker import Report
from chaos.run import Result, result_record
from chaos.scenarios import SCENARIOS


def record(
    name: str, seed: int, *, at: str = "2026-11-24T07:00:00+00:00", tallies: dict[str, int] | None = None, **counts: int
) -> dict[str, object]:
    report = Report(accepted=100, executions=110, recovery=[0.5, 1.0, 2.0], **counts)  # type: ignore[arg-type]
    result = Result(SCENARIOS[name], report, 12.0, tallies or {})
    line = result_record(result, seed=seed, quick=True, commit="abc1234")
    return {**line, "at": at}


def write(path: Path, records: list[dict[str, object]], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


def test_a_record_carries_the_counts_and_whether_the_run_passed() -> None:
    line = record("kill_loop", 7, overlaps=2)
    assert line["scenario"] == "kill_loop" and line["seed"] == 7 and line["commit"] == "abc1234"
    assert line["accepted"] == 100 and line["overlaps"] == 2 and line["lost"] == 0
    assert line["passed"] is False and line["failures"] == ["overlaps=2"]
    assert line["recovery_n"] == 3 and line["recovery_p50"] == 1.0 and line["recovery_p99"] == 2.0
    json.dumps(line)  # all of it is JSON


def test_tally_sums_per_scenario_and_lists_failed_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path / "runs.jsonl",
        [
            record("kill_loop", 1),
            record("kill_loop", 2, lost=3),
            record("power_loss", 1, lost_in_rollback=4, tallies={"forgotten_by_redis": 5, "restored_by_mirror": 6}),
            record("power_loss", 2, tallies={"forgotten_by_redis": 1, "restored_by_mirror": 1}),
        ],
        tail='{"scenario": "kill_lo',  # a run killed while it wrote its line
    )
    assert tally.main([str(path)]) == 1
    out = capsys.readouterr()
    rows = {line.split()[0]: line.split() for line in out.out.splitlines() if line and not line.startswith("FAILED")}
    assert rows["kill_loop"][1:5] == ["2", "1", "200", "220"] and rows["kill_loop"][5] == "3"
    assert rows["power_loss"][1:3] == ["2", "2"] and rows["power_loss"][8] == "4"
    assert rows["all"][1:3] == ["4", "3"]
    assert "power_loss: forgotten by redis 6, restored by mirror 7" in out.out
    assert "FAILED kill_loop seed 2" in out.out and "lost=3" in out.out
    assert "skipped, not JSON" in out.err


def test_tally_selects_by_time_commit_and_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    early = record("kill_loop", 1, at="2026-11-23T10:00:00+00:00", lost=1)
    late = record("kill_loop", 2, at="2026-11-24T08:00:00+00:00")
    path = write(tmp_path / "runs.jsonl", [early, late])
    assert tally.main([str(path), "--since", "2026-11-24"]) == 0  # the failed early run is left out
    assert tally.main([str(path), "--commit", "zzz"]) == 1
    assert "no runs selected" in capsys.readouterr().out
    assert tally.main([str(path), "--full"]) == 1  # both runs are quick ones
