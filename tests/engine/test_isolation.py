"""The engine package must import and work without Django."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_engine_imports_without_django() -> None:
    code = (
        "import sys, jobconsole.core, jobconsole.core.worker, jobconsole.core.maintenance;"
        "bad = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_engine_source_has_no_django_import() -> None:
    for path in (ROOT / "jobconsole" / "core").rglob("*.py"):
        text = path.read_text()
        assert "import django" not in text and "from django" not in text, path
