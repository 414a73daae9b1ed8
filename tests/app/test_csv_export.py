"""CSV the project writes opens in a spreadsheet without running formulas (jobconsole/csv_cells.py): the dead
letters' export, and the helper every CSV goes through."""

import csv
import io
from datetime import UTC, datetime

import pytest

from jobconsole.core import task
from jobconsole.csv_cells import csv_cell, csv_lines, neutralise
from tests.app.test_console_pages import VIEW, web
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import run_worker

HYPERLINK = '=HYPERLINK("http://evil","x")'
DDE = "+cmd|' /C calc'!A0"


@task(name="tests.csv_hostile", queue="tests.csv_hostile", max_retries=0)
def fail_with_its_parameter(x: str) -> None:
    raise ValueError(x)  # a parameter echoed in the error message, as many real failures do


@pytest.mark.db
@pytest.mark.django_db(transaction=True)
def test_dead_letter_csv_neutralises_formulas_from_parameters_and_errors(client, mirror, r):
    client.enqueue("tests.csv_hostile", {"x": HYPERLINK})
    client.enqueue("examples.fail", {"message": DDE}, max_retries=0)
    run_worker(r, ["tests.csv_hostile", "examples.fail"])
    mirror.drain()
    response = web(*VIEW).get("/dead/export.csv")
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert sorted(row["message"] for row in rows) == sorted(["'" + HYPERLINK, "'" + DDE])
    for row in rows:
        assert row["attempts"] == "1"  # a count we produce stays a number, no quote
        for name, cell in row.items():
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), (name, cell)


def test_text_that_a_spreadsheet_reads_as_a_formula_gets_a_leading_quote() -> None:
    for text in ("=1+1", "+1", "-5", "@SUM(A1)", "\tx", "\rx", "  =1+1", "\n@x", "\uff1d1+1"):
        assert neutralise(text) == "'" + text, repr(text)
    for text in ("", "plain", "a=b", "1-2", "'=quoted already"):
        assert neutralise(text) == text, repr(text)


def test_cells_keep_our_numbers_and_neutralise_text() -> None:
    assert [csv_cell(v) for v in (-5, 2.5, None, "-5", True)] == [-5, 2.5, "", "'-5", "True"]
    assert csv_cell(datetime(2026, 1, 2, 3, 4, tzinfo=UTC)) == "2026-01-02T03:04:00+00:00"
    text = "".join(csv_lines(["id", "n", "note"], [("a", -5, '=1,"2"\nx')]))
    assert list(csv.reader(io.StringIO(text))) == [["id", "n", "note"], ["a", "-5", '\'=1,"2"\nx']]
