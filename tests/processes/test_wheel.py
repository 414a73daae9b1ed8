"""The installable package: build the wheel, check its metadata, install it into a scratch virtualenv (from the
package index that pip is configured with, as bootstrap installs), and in a new `startproject` with exactly the
README's settings run a job, scrape /metrics and open every console page (DEBUG off, hashed static files)."""

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


def readme_adoption_lines() -> tuple[list[str], list[str]]:
    """The README's "Use it in your own Django project" settings, as written: (settings lines, urls lines), the
    optional API's line included. Applied as they are, so the README and this test cannot drift apart."""
    readme = (PROJECT / "README.md").read_text()
    section = readme[readme.index("## Use it in your own Django project") :]
    block = section[section.index("```python\n") + len("```python\n") :]
    block = block[: block.index("\n```")]
    settings_lines, url_lines = [], []
    for line in block.splitlines():
        if line.startswith("# Optional, the HTTP API:"):
            apps, route = re.fullmatch(r"# Optional, the HTTP API: (.+); (path\(.+\)\))", line).groups()  # type: ignore[union-attr]
            settings_lines.append(apps)
            url_lines.append(f"urlpatterns += [{route}]")
        elif line.startswith("urlpatterns"):
            url_lines.append(line)
        elif line.strip() and not line.startswith("#"):
            settings_lines.append(line)
    return settings_lines, url_lines


# What this test adds to `startproject`'s settings beside the README's lines: a production-like static files setup
# (hashed names, DEBUG off), its Redis, its app, and the login page the README says to point LOGIN_URL at.
SITE_SETTINGS = """\
DEBUG = False
ALLOWED_HOSTS = ["testserver"]
STATIC_ROOT = BASE_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"},
}
INSTALLED_APPS += ["shop"]
JOBCONSOLE["REDIS_URL"] = REDIS_URL
LOGIN_URL = "admin:login"
"""

TASKS = """\
from pathlib import Path

from jobconsole.core import task


@task(name="shop.note")
def note(path: str, text: str) -> dict[str, int]:
    Path(path).write_text(text)
    return {"wrote": len(text)}
"""

# Every console page as a logged-in operator (a superuser), with DEBUG off and the manifest storage: all 200,
# and plotly.js answers at the URL the overview names.
PAGES = """\
import re
from django.contrib.auth.models import User
from django.test import Client
browser = Client()
browser.force_login(User.objects.create_superuser("operator", password="pw"))
pages = ["", "queues/", "queues/shop.note/", "jobs/", "jobs/%(job)s/", "running/", "scheduled/", "schedules/",
         "dead/", "workers/", "flow/", "tasks/", "tasks/shop.note/", "audit/", "bulk/"]
codes = {page: browser.get("/jobs/" + page).status_code for page in pages}
overview = browser.get("/jobs/").content.decode()
[plotly] = re.findall(r'<script src="([^"]*plotly[^"]*)"', overview)
hashed = bool(re.search(r'/static/dashboards/console\\.[0-9a-f]{12}\\.css', overview))
print(sorted(set(codes.values())), [p for p, c in codes.items() if c != 200], browser.get(plotly).status_code, hashed)
"""


def write_site(site: Path, python: Path, env: dict[str, str], redis_url: str) -> None:
    """`django-admin startproject shopsite`, the README's lines applied as written, and a shop app."""
    site.mkdir()
    run(python, "-m", "django", "startproject", "shopsite", site, cwd=site, env=env)
    settings_lines, url_lines = readme_adoption_lines()
    settings = site / "shopsite" / "settings.py"
    settings.write_text(
        f"REDIS_URL = {redis_url!r}\n" + settings.read_text() + "\n".join(settings_lines) + "\n" + SITE_SETTINGS
    )
    urls = site / "shopsite" / "urls.py"
    urls.write_text("from django.urls import include\n" + urls.read_text() + "\n".join(url_lines) + "\n")
    (site / "shop").mkdir()
    (site / "shop" / "__init__.py").write_text("")
    (site / "shop" / "tasks.py").write_text(TASKS)


def test_the_wheel_installs_into_a_fresh_project_and_runs_its_tasks(
    tmp_path: Path, redis_url: str, r: "redis.Redis"
) -> None:
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    for expected in (
        "jobconsole/core/lua/claim.lua", "jobconsole/core/lua/_lib.lua", "jobconsole/migrations/0001_initial.py",
        "jobconsole/management/commands/runworker.py", "jobconsole/templates/admin/jobconsole/job/change_list.html",
        "dashboards/templates/dashboards/base.html", "dashboards/templates/dashboards/overview.html",
        "dashboards/vendor/plotly-basic.min.js", "dashboards/vendor/plotly.js-LICENSE.txt",
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
    assert runtime == {"django", "redis", "python-ulid", "django-htmx", "tqdm", "prometheus-client"}
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

    # Nothing of this checkout on the path: the project gets jobconsole from the scratch virtualenv.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DJANGO", "JOBCONSOLE", "VIRTUAL_ENV"))}
    env |= {"PYTHONUNBUFFERED": "1", "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
    site = tmp_path / "site"
    write_site(site, python, env, redis_url)

    def manage(*args: str) -> str:
        return run(python, "manage.py", *args, cwd=site, env=env, timeout=120)

    where = manage("shell", "-c", "import jobconsole, dashboards; print(jobconsole.__file__, dashboards.__file__)")
    assert where.count(str(venv)) == 2, where
    manage("check")
    manage("migrate", "--noinput")
    manage("collectstatic", "--noinput")  # the manifest the pages' hashed names come from

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
    assert manage("shell", "-c", probe).splitlines()[-1].split() == ["completed", "/jobs/", "200", "healthy"]
    # /metrics after a plain install and one include of jobconsole_api.urls (a loopback scrape, allowed here
    # without a token).
    scrape = textwrap.dedent("""\
        from django.test import Client
        response = Client(REMOTE_ADDR="127.0.0.1").get("/api/metrics")
        print(response.status_code, "jobconsole_queue_jobs" in response.content.decode() or response.content[:300])
    """)  # fmt: skip
    loopback = {**env, "JOBCONSOLE_METRICS_ANONYMOUS_LOOPBACK": "1"}
    assert run(python, "manage.py", "shell", "-c", scrape, cwd=site, env=loopback).splitlines()[-1] == "200 True"
    # The console as an operator sees it, with the README's settings only: no finder, middleware or context
    # processor of ours, DEBUG off, hashed static names.
    assert manage("shell", "-c", PAGES % {"job": job_id}).splitlines()[-1] == "[200] [] 200 True"
