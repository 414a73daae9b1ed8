"""project/settings.py: no SECRET_KEY default outside DEBUG, and HTTPS-only settings that spare /healthz."""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from tests.conftest import PROJECT


def load_settings(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG", "DJANGO_SETTINGS_MODULE"}}
    code = 'import project.settings as s; print(s.DEBUG, len(s.SECRET_KEY), getattr(s, "SESSION_COOKIE_SECURE", False))'
    return subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT, text=True, capture_output=True,
        env={**base, "JOBCONSOLE_VAR_DIR": str(tmp_path / "var"), **env},
    )  # fmt: skip


def test_no_secret_key_with_debug_off_is_refused(tmp_path: Path) -> None:
    result = load_settings(tmp_path)
    assert result.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is not set" in result.stderr


def test_debug_makes_and_keeps_a_local_key(tmp_path: Path) -> None:
    first = load_settings(tmp_path, DEBUG="1")
    assert first.returncode == 0, first.stderr
    assert first.stdout.split()[:2] == ["True", str(len((tmp_path / "var" / "secret_key").read_text()))]
    assert load_settings(tmp_path, DEBUG="1").stdout == first.stdout


def test_without_debug_the_key_make_run_made_is_read_never_made(tmp_path: Path) -> None:
    """Commands in a second shell beside `make run` (DEBUG off there) use the key `make run` made."""
    made = load_settings(tmp_path, DEBUG="1")
    key = (tmp_path / "var" / "secret_key").read_text()
    beside = load_settings(tmp_path)
    assert beside.returncode == 0, beside.stderr
    assert beside.stdout.split()[:2] == ["False", str(len(key))] == ["False", made.stdout.split()[1]]
    # An explicit SECRET_KEY wins over the file.
    assert load_settings(tmp_path, SECRET_KEY="y" * 60).stdout.split()[:2] == ["False", "60"]


def test_production_settings_with_a_key(tmp_path: Path) -> None:
    result = load_settings(tmp_path, SECRET_KEY="x" * 50)
    assert result.stdout.split() == ["False", "50", "True"], result.stderr
    assert not (tmp_path / "var" / "secret_key").exists()


@pytest.mark.django_db
def test_https_redirect_spares_the_health_probe(settings: Any) -> None:
    settings.SECURE_SSL_REDIRECT = True  # as in production (the tests' settings turn it off)
    assert Client().get("/").status_code == 301
    assert Client().get("/healthz").status_code in {200, 503}
