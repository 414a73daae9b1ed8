"""The installable package: build the wheel, install it into a scratch virtualenv (from the package index that
pip is configured with, as bootstrap installs), and run a job from a Django project of its own that knows
nothing of this repository."""

import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
import redis

import jobconsole
from tests.conftest import PROJECT

pytestmark = [pytest.mark.slow, pytest.mark.wheel, pytest.mark.timeout(600)]

COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "var", "build", "*.egg-info", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"
)


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, text=True, capture_output=True, timeout=timeout)
    assert result.returncode == 0, (
        f"{' '.join(map(str, args))} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    )
    return result.stdout


def build_wheel(tmp: Path) -> Path:
    # From a copy, so that setuptools' build/ and egg-info never land in the checkout.
    source = tmp / "source"
    shutil.copytree(PROJECT, source, ignore=COPY_IGNORE, symlinks=True)
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", tmp / "dist", source, cwd=tmp)
    (wheel,) = (tmp / "dist").glob("jobconsole-*.whl")
    return wheel


def pinned_constraints(tmp: Path) -> Path:
    """requirements.txt's pins as constraints (no extras, no includes), so the scratch install gets the
    versions the tests run with."""
    lines = (PROJECT / "requirements.txt").read_text().splitlines()
    pins = [re.sub(r"\[.*\]", "", line) for line in lines if "==" in line]
    path = tmp / "constraints.txt"
    path.write_text("\n".join(pins) + "\n")
    return path


SETTINGS = """\
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
SECRET_KEY = "wheel-test-only"
DEBUG = True
ALLOWED_HOSTS = ["testserver"]
INSTALLED_APPS = [
    "django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions",
    "django.contrib.messages", "django.contrib.staticfiles", "django_htmx", "jobconsole", "dashboards",
    "jobconsole_api", "shop",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates", "DIRS": [], "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request", "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
ROOT_URLCONF = "shopsite.urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "db.sqlite3"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
STATIC_URL = "static/"
JOBCONSOLE = {"REDIS_URL": REDIS_URL}
"""

URLS = """\
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("ops/jobs/", include("dashboards.urls")),
    path("ops/api/", include("jobconsole_api.urls")),
]
"""

TASKS = """\
from pathlib import Path

from jobconsole.core import task


@task(name="shop.note")
def note(path: str, text: str) -> dict[str, int]:
    Path(path).write_text(text)
    return {"wrote": len(text)}
"""

MANAGE = """\
import os
import sys

from django.core.management import execute_from_command_line

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shopsite.settings")
execute_from_command_line(sys.argv)
"""


def write_site(site: Path, redis_url: str) -> None:
    files = {
        "manage.py": MANAGE,
        "shopsite/__init__.py": "",
        "shopsite/settings.py": f"REDIS_URL = {redis_url!r}\n" + SETTINGS,
        "shopsite/urls.py": URLS,
        "shop/__init__.py": "",
        "shop/tasks.py": TASKS,
    }
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(textwrap.dedent(text))


def test_the_wheel_installs_into_a_fresh_project_and_runs_its_tasks(
    tmp_path: Path, redis_url: str, r: "redis.Redis"
) -> None:
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    for expected in (
        "jobconsole/core/lua/claim.lua", "jobconsole/core/lua/_lib.lua", "jobconsole/migrations/0001_initial.py",
        "jobconsole/management/commands/runworker.py", "jobconsole/templates/admin/jobconsole/job/change_list.html",
        "dashboards/templates/dashboards/base.html", "dashboards/templates/dashboards/overview.html",
    ):  # fmt: skip
        assert expected in names
    assert not [n for n in names if n.split("/")[0] in {"project", "tests", "chaos", "bench", "scripts"}]
    assert {"jobconsole/py.typed", "dashboards/py.typed", "jobconsole_api/py.typed"} <= set(names)
    [metadata_name] = [n for n in names if n.endswith(".dist-info/METADATA")]
    dist_info = metadata_name.rsplit("/", 1)[0]
    wheel_zip = zipfile.ZipFile(wheel)
    assert "The Jobconsole authors" in wheel_zip.read(f"{dist_info}/licenses/LICENSE").decode()
    metadata = email.parser.Parser().parsestr(wheel_zip.read(metadata_name).decode())
    assert metadata["Version"] == jobconsole.__version__ and metadata["License-Expression"] == "MIT"
    requires = metadata.get_all("Requires-Dist") or []
    runtime = {re.split(r"[\[<>=!; ]", r)[0].lower() for r in requires if "extra ==" not in r}
    assert runtime == {"django", "redis", "python-ulid", "django-htmx", "plotly", "tqdm", "prometheus-client"}
    assert "redis[hiredis]" in " ".join(requires)  # hiredis once, through redis's extra
    assert set(metadata.get_all("Provides-Extra") or []) == {"postgres", "server", "otel"}
    classifiers = set(metadata.get_all("Classifier") or [])
    assert {"Framework :: Django :: 6.0", "Framework :: Django :: 6.1", "Programming Language :: Python :: 3.12",
            "Programming Language :: Python :: 3.13", "Typing :: Typed"} <= classifiers  # fmt: skip

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    run(
        python, "-m", "pip", "install", "--quiet", "--find-links", wheel.parent, "-c", pinned_constraints(tmp_path),
        "jobconsole", cwd=tmp_path,
    )  # fmt: skip

    site = tmp_path / "site"
    write_site(site, redis_url)
    # Nothing of this checkout on the path: the project gets jobconsole from the scratch virtualenv.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DJANGO", "JOBCONSOLE", "VIRTUAL_ENV"))}
    env |= {"PYTHONUNBUFFERED": "1", "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}

    def manage(*args: str) -> str:
        return run(python, "manage.py", *args, cwd=site, env=env, timeout=120)

    where = manage("shell", "-c", "import jobconsole, dashboards; print(jobconsole.__file__, dashboards.__file__)")
    assert where.count(str(venv)) == 2, where
    manage("check")
    manage("migrate", "--noinput")

    out = tmp_path / "note.txt"
    job_id = manage("enqueue", "shop.note", json.dumps({"path": str(out), "text": "from the wheel"})).split()[0]
    # Only the project's own tasks are registered (its app's tasks.py): the worker claims from shop.note alone.
    manage("runworker", "--burst", "--no-mirror")
    assert out.read_text() == "from the wheel"
    shown = json.loads(manage("jobs", "show", job_id))
    assert shown["state"] == "completed" and shown["task"] == "shop.note", shown
    assert r.smembers("jc:{meta}:queues") == {"shop.note"}

    manage("runmirror", "--burst")
    probe = textwrap.dedent("""\
        from django.test import Client
        from django.urls import reverse
        from jobconsole.models import Job
        job = Job.objects.get(id=%r)
        health = Client().get(reverse("dashboards:healthz"))
        print(job.state, reverse("dashboards:overview"), health.status_code, health.json()["status"])
    """) % job_id  # fmt: skip
    assert manage("shell", "-c", probe).splitlines()[-1].split() == ["completed", "/ops/jobs/", "200", "healthy"]
    # /metrics after a plain install and one include of jobconsole_api.urls (a loopback scrape, allowed here
    # without a token).
    scrape = textwrap.dedent("""\
        from django.test import Client
        response = Client(REMOTE_ADDR="127.0.0.1").get("/ops/api/metrics")
        print(response.status_code, "jobconsole_queue_jobs" in response.content.decode() or response.content[:300])
    """)  # fmt: skip
    loopback = {**env, "JOBCONSOLE_METRICS_ANONYMOUS_LOOPBACK": "1"}
    assert run(python, "manage.py", "shell", "-c", scrape, cwd=site, env=loopback).splitlines()[-1] == "200 True"
