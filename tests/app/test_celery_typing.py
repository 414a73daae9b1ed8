"""Celery-style calls are typed like Celery's (the celery-types stubs): mypy accepts examples/celery_style.py and
refuses wrong arguments to delay and apply_async, and a wrong use of AsyncResult.get's value; with celery-types
installed, the same module with Celery's imports type-checks as well."""

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT

pytestmark = pytest.mark.slow

WRONG = """\
from datetime import datetime

from examples.celery_style import add, build_report, fetch_status

add.delay("2", 3)
add.apply_async((2, 3), countdown="soon")
build_report.delay("day", format="csv")
text: str = add.delay(1, 2).get()
fetch_status.delay(1)
add.apply_async((1, 2), eta=datetime.now().isoformat())
"""


JOBCONSOLE_IMPORT = "from jobconsole.celery import AsyncResult, CeleryTask, shared_task\n"
CELERY_IMPORTS = (
    "from celery import Task as CeleryTask\nfrom celery import shared_task\nfrom celery.result import AsyncResult\n"
)


def mypy(*paths: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SECRET_KEY": "tools-only-not-a-secret"}
    return subprocess.run([sys.executable, "-m", "mypy", *map(str, paths)], cwd=PROJECT, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_the_example_type_checks_and_wrong_calls_do_not(tmp_path: Path) -> None:
    good = mypy("examples/celery_style.py")
    assert good.returncode == 0, good.stdout + good.stderr
    wrong = tmp_path / "wrong.py"
    wrong.write_text(WRONG)
    bad = mypy(wrong)
    errors = [line.split(":")[1] for line in bad.stdout.splitlines() if ": error:" in line]
    assert errors == ["5", "6", "7", "8", "9", "10"], bad.stdout


def test_the_example_is_celery_code_but_for_its_import(tmp_path: Path) -> None:
    try:
        importlib.metadata.version("celery-types")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("celery-types is not installed (requirements-dev.txt)")
    example = (PROJECT / "examples" / "celery_style.py").read_text()
    assert JOBCONSOLE_IMPORT in example
    original = tmp_path / "celery_original.py"
    original.write_text(example.replace(JOBCONSOLE_IMPORT, CELERY_IMPORTS))
    checked = mypy(original)
    assert checked.returncode == 0, checked.stdout + checked.stderr
