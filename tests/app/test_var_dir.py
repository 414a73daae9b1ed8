"""var/ (JOBCONSOLE_VAR_DIR) is owner-only from the start under the usual umask 022 (project/var_dir.py): the
directory 0700, the SQLite database with its -wal and -shm files and the DEBUG secret key 0600; an older, looser
var/ is tightened at start-up, and said once in the log."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from project import var_dir
from tests.conftest import PROJECT

# While its connection is open, so that SQLite's -wal and -shm files exist: every mode in var/ and the key.
OPEN_DATABASE = """
import json, os, stat, django
django.setup()
from django.core.management import call_command
from django.conf import settings
from django.db import connection
call_command("migrate", verbosity=0)
with connection.cursor() as cursor:
    cursor.execute("INSERT INTO django_content_type (app_label, model) VALUES ('var', 'test')")
var = os.environ["JOBCONSOLE_VAR_DIR"]
modes = {name: stat.S_IMODE(os.lstat(os.path.join(var, name)).st_mode) for name in os.listdir(var)}
print(json.dumps({"var": stat.S_IMODE(os.stat(var).st_mode), "files": modes, "key": settings.SECRET_KEY}))
"""


def run_project(var: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A process of project.settings with DEBUG on and no SECRET_KEY (so the key is var/'s), umask 022."""
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG", "DJANGO_SETTINGS_MODULE"}}
    env.update(DEBUG="1", JOBCONSOLE_VAR_DIR=str(var), DJANGO_SETTINGS_MODULE="project.settings")
    env.update(PYTHONPATH=str(PROJECT), LOG_LEVEL="INFO")
    return subprocess.run(
        [sys.executable, *args], cwd=PROJECT, env=env, text=True, capture_output=True, umask=0o022, timeout=120
    )


def test_a_fresh_var_dir_is_owner_only_from_the_start(tmp_path: Path) -> None:
    var = tmp_path / "var"
    result = run_project(var, "-c", OPEN_DATABASE)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["var"] == 0o700
    files = {name: mode for name, mode in seen["files"].items() if name != "static"}  # static: public files
    assert {"jobconsole.sqlite3", "jobconsole.sqlite3-wal", "jobconsole.sqlite3-shm", "secret_key"} <= set(files)
    assert files == dict.fromkeys(files, 0o600), {name: f"{mode:o}" for name, mode in files.items()}
    assert seen["key"] == (var / "secret_key").read_text().strip()
    assert "owner-only" not in result.stderr  # nothing to tighten in a var/ made right


def test_a_looser_var_dir_is_tightened_once_and_said_in_the_log(tmp_path: Path) -> None:
    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    (var / "secret_key").write_text("k" * 50)
    (var / "jobconsole.sqlite3").write_bytes(b"")
    for path in (var, var / "secret_key", var / "jobconsole.sqlite3"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    first = run_project(var, "manage.py", "check")
    assert first.returncode == 0, first.stderr
    assert stat.S_IMODE(var.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in (var / "secret_key", var / "jobconsole.sqlite3")} == {0o600}
    assert (var / "secret_key").read_text() == "k" * 50  # tightened, not remade
    [line] = [line for line in first.stderr.splitlines() if "owner-only" in line]
    assert "WARNING" in line and "secret_key (0644 -> 0600)" in line and f"{var} (0755 -> 0700)" in line
    second = run_project(var, "manage.py", "check")
    assert second.returncode == 0 and "owner-only" not in second.stderr


def test_a_shared_directory_is_left_open_and_the_log_says_why(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp: closing it would lock its other users out
    var_dir.protect(shared)
    var_dir.report()
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert any("shared (sticky bit)" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)
