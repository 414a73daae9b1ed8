"""The installable package, adopted as the README says: build the wheel, check its metadata, install it into a
scratch virtualenv (from the package index that pip is configured with, as bootstrap installs), and in a new
`startproject` with exactly the README's settings (DEBUG off, hashed static files) run a job and scrape /metrics;
then serve the project with gunicorn and open every console page in chromium as a logged-in operator (marked
`browser` too; both in `make test`'s serial pass)."""

import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

import jobconsole
from jobconsole.core.connection import connect
from tests.browser.support import Screenshots
from tests.conftest import PROJECT
from tests.live import wait_until
from tests.redis_server import RedisServer, free_port

# Both tests share one build, install and project (the module's fixture), which the first of them to run pays for.
pytestmark = [pytest.mark.slow, pytest.mark.wheel, pytest.mark.timeout(600)]
CHROMIUM = Path("/usr/bin/chromium")

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


# What this test adds to `startproject`'s settings beside the README's lines, as an adopting project in production
# has them: hashed static files (collectstatic, DEBUG off) served its own way (WhiteNoise here, the project's choice:
# the package does not depend on it), its Redis, its app, and the login page the README says to point LOGIN_URL at.
SITE_SETTINGS = """\
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "testserver"]
STATIC_ROOT = BASE_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"},
}
MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
                  "whitenoise.middleware.WhiteNoiseMiddleware")
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


@dataclass
class AdoptedSite:
    """The scratch virtualenv with the wheel installed, and the new project in which a job ran."""

    wheel: Path
    venv: Path
    site: Path
    env: dict[str, str]  # nothing of this checkout on the path
    redis_url: str
    job_id: str  # ran by runworker, mirrored to the database
    note: Path  # what the job wrote

    def manage(self, *args: str, **extra_env: str) -> str:
        return run(
            self.venv / "bin" / "python", "manage.py", *args, cwd=self.site, env=self.env | extra_env, timeout=120
        )


@pytest.fixture(scope="module")
def adopted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdoptedSite]:
    """The wheel built and installed into a scratch virtualenv; a new project with the README's settings, migrated,
    its static files collected; one of its app's jobs run by `runworker --burst` and mirrored; one more due in half
    an hour (inside the scheduled page's chart, which spans the next whole hour). On a Redis of its own."""
    tmp = tmp_path_factory.mktemp("adopt")
    server = RedisServer(tmp / "redis").start()
    try:
        wheel = build_wheel(tmp)
        venv = tmp / "venv"
        # The README's install with its `server` extra (gunicorn); WhiteNoise is the project's own choice. By this
        # pip into a venv without one of its own, and no byte-compiling up front (Python caches what the project
        # imports): the same packages in 7 s instead of 30 (measured once, on a loaded 2-core machine).
        run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp)
        run(
            sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--quiet", "--no-compile",
            "--find-links", wheel.parent, "-c", pinned_constraints(tmp), "jobconsole[server]", "whitenoise", cwd=tmp,
        )  # fmt: skip
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DJANGO", "JOBCONSOLE", "VIRTUAL_ENV"))
        }
        env |= {"PYTHONUNBUFFERED": "1", "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
        site = tmp / "site"
        write_site(site, venv / "bin" / "python", env, server.url)
        note = tmp / "note.txt"
        adopted = AdoptedSite(wheel, venv, site, env, server.url, "", note)
        adopted.manage("check")
        adopted.manage("migrate", "--noinput")
        adopted.manage("collectstatic", "--noinput")  # the manifest the pages' hashed names come from
        params = json.dumps({"path": str(note), "text": "from the wheel"})
        adopted.job_id = adopted.manage("enqueue", "shop.note", params).split()[0]
        # Only the project's own tasks are registered (its app's tasks.py): the worker claims from shop.note alone.
        adopted.manage("runworker", "--burst", "--no-mirror")
        adopted.manage("enqueue", "--delay", "1800", "shop.note", json.dumps({"path": str(tmp / "later"), "text": ""}))
        adopted.manage("runmirror", "--burst")
        yield adopted
    finally:
        server.stop()


def test_the_wheel_installs_into_a_fresh_project_and_runs_its_tasks(adopted: AdoptedSite) -> None:
    names = zipfile.ZipFile(adopted.wheel).namelist()
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
    wheel_zip = zipfile.ZipFile(adopted.wheel)
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

    where = adopted.manage(
        "shell", "-c", "import jobconsole, dashboards; print(jobconsole.__file__, dashboards.__file__)"
    )
    assert where.count(str(adopted.venv)) == 2, where
    assert adopted.note.read_text() == "from the wheel"
    shown = json.loads(adopted.manage("jobs", "show", adopted.job_id))
    assert shown["state"] == "completed" and shown["task"] == "shop.note", shown
    assert connect(adopted.redis_url).smembers("jc:{meta}:queues") == {"shop.note"}

    probe = textwrap.dedent("""\
        from django.test import Client
        from django.urls import reverse
        from jobconsole.models import Job
        job = Job.objects.get(id=%r)
        health = Client().get(reverse("dashboards:healthz"))
        print(job.state, reverse("dashboards:overview"), health.status_code, health.json()["status"])
    """) % adopted.job_id  # fmt: skip
    assert adopted.manage("shell", "-c", probe).splitlines()[-1].split() == ["completed", "/jobs/", "200", "healthy"]
    # /metrics after a plain install and one include of jobconsole_api.urls (a loopback scrape, allowed here
    # without a token).
    scrape = textwrap.dedent("""\
        from django.test import Client
        response = Client(REMOTE_ADDR="127.0.0.1").get("/api/metrics")
        print(response.status_code, "jobconsole_queue_jobs" in response.content.decode() or response.content[:300])
    """)  # fmt: skip
    assert (
        adopted.manage("shell", "-c", scrape, JOBCONSOLE_METRICS_ANONYMOUS_LOOPBACK="1").splitlines()[-1] == "200 True"
    )


# The README: "a login with the admin's view, operate and purge permissions"; staff, for the admin's login page.
OPERATOR = """\
from django.contrib.auth.models import Permission, User
operator = User.objects.create_user("operator", password=%r, is_staff=True)
perms = Permission.objects.filter(content_type__app_label="jobconsole", codename__regex=r"^(view|operate|purge)_")
operator.user_permissions.set(perms)
print(operator.is_superuser, len(perms))
"""
ZONE = "Asia/Kolkata"  # the browser's (5 h 30 ahead of the server's TIME_ZONE, startproject's UTC)
EXACT_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+")
# A console page that the sidebar does not list but the lists link to: a queue, a job, a task.
DETAIL = re.compile(r"/jobs/(queues|jobs|tasks)/[^/?#]+/(\?[^#]*)?")
LINKS_JS = "links => links.map(a => a.getAttribute('href'))"
TIMES_JS = """() => [...document.querySelectorAll("time[datetime]")].map(
    t => [t.getAttribute("datetime"), t.getAttribute("title") || "", t.textContent.trim()])"""
# The end of each time chart's x axis (a wall-clock time, in the zone the server rendered the page in).
AXIS_ENDS_JS = """() => [...document.querySelectorAll(".chart[data-figure]")].map(
    d => JSON.parse(document.getElementById(d.dataset.figure).textContent).layout.xaxis || {})
    .filter(x => x.type === "date" && x.range).map(x => x.range[1])"""
CHARTS_DRAWN_JS = "() => [...document.querySelectorAll('.chart[data-figure]')].every(d => d.querySelector('.main-svg'))"
# Each live part's poll, now rather than in 3 to 30 s, as htmx makes it (the element's own request, target and
# swap); scrolled into view first, since console.js holds back the polls of parts off-screen.
POLL_JS = """async () => {
    const live = [...document.querySelectorAll("[hx-get][hx-trigger^='every']")];
    for (const part of live) {
        part.scrollIntoView();
        await htmx.ajax("GET", part.getAttribute("hx-get"), {source: part});
    }
    window.scrollTo(0, 0);
    return live.length;
}"""


def _serving(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/admin/login/", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.mark.browser
def test_an_operator_uses_the_adopted_console_in_chromium(adopted: AdoptedSite, tmp_path: Path) -> None:
    """gunicorn serves the project (DEBUG off, WhiteNoise for its static files); an operator (staff, the README's
    permissions, no superuser) logs in through the admin's form in chromium, in a non-UTC time zone, and opens every
    page of the sidebar and a queue, a job and a task from their lists, polling each page's live parts once: every
    page 200, no request of theirs answered 4xx/5xx, no script error, every chart drawn by plotly, every exact time
    and the time axes in the browser's zone."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: scripts/bootstrap.sh installs it as root on Debian")
    from playwright.sync_api import sync_playwright

    password = "operator-password-for-the-test"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "gunicorn.log"
    with log.open("wb") as out:
        web = subprocess.Popen(
            [adopted.venv / "bin" / "gunicorn", "shopsite.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1",
             "--threads", "8", "--access-logfile", "-"],
            cwd=adopted.site, env=adopted.env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    shots = Screenshots(PROJECT / "var" / "screenshots" / "test_wheel.adopted_console")
    shutil.rmtree(shots.directory, ignore_errors=True)
    try:
        # The operator's account, made while gunicorn starts.
        assert adopted.manage("shell", "-c", OPERATOR % password).split()[-2] == "False"
        wait_until(lambda: _serving(base), 60, "gunicorn to serve the login page", lambda: log.read_text())
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
            try:
                context = browser.new_context(timezone_id=ZONE, viewport={"width": 1440, "height": 900})
                context.set_default_timeout(60_000)  # Playwright's 30 s is short on a loaded 2-core machine
                page = context.new_page()
                try:
                    _operate(page, base, password, shots)
                except Exception:
                    shots.take(page, "failed")
                    raise
            finally:
                browser.close()
    finally:
        web.terminate()
        web.wait(timeout=20)


def _operate(page: Any, base: str, password: str, shots: Screenshots) -> None:
    problems: list[str] = []  # failed requests, uncaught exceptions, console errors
    responses: list[tuple[int, str, bool]] = []  # (status, URL, whether htmx asked)
    page.on("response", lambda r: responses.append((r.status, r.url, "hx-request" in r.request.headers)))
    page.on("requestfailed", lambda q: problems.append(f"failed {q.method} {q.url}: {q.failure}"))
    page.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
    page.on(
        "console",  # "Failed to load resource" repeats a failed response, which `responses` names with its URL
        lambda m: m.type == "error" and not m.text.startswith("Failed to load resource")
        and problems.append(f"console: {m.text}"),
    )  # fmt: skip

    # As a person: the console sends an anonymous visitor to the login page, which leads back to it.
    page.goto(f"{base}/jobs/")
    assert page.url == f"{base}/admin/login/?next=/jobs/", page.url
    page.fill("#id_username", "operator")
    page.fill("#id_password", password)
    with page.expect_navigation():
        page.click("input[type=submit]")
    assert page.url == f"{base}/jobs/", page.url
    # Chromium names India's zone by its older alias, Asia/Calcutta: the cookie carries the browser's name.
    zone = ZoneInfo(page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone"))
    assert zone.utcoffset(datetime(2026, 1, 1)) == ZoneInfo(ZONE).utcoffset(datetime(2026, 1, 1)), zone

    # The first page after the login in the browser's zone too: rendered before console.js set its cookie, it is
    # fetched again (base.html's data-zone: the zone the server rendered the page in).
    page.wait_for_function("document.documentElement.dataset.zone === Intl.DateTimeFormat().resolvedOptions().timeZone")
    page.wait_for_load_state("networkidle")
    sidebar = list(dict.fromkeys(page.eval_on_selector_all("nav.sidebar a[href]", LINKS_JS)))
    assert len(sidebar) >= 13 and sidebar[0] == "/jobs/" and "/admin/" in sidebar, sidebar  # 12 pages, the admin
    details: dict[str, str] = {}  # the first queue, job and task a page links to
    statuses: dict[str, int] = {}
    charts: dict[str, int] = {}
    polled = 0
    times: list[tuple[str, str, str]] = []  # (page, shown, the same instant in the browser's zone)
    axis_ends: list[tuple[str, str]] = []  # (page, end): the overview's charts end now

    def check(path: str) -> None:
        """The page on show: its live parts polled, its charts drawn, its times noted, its detail links."""
        nonlocal polled
        polled += page.evaluate(POLL_JS)
        charts[path.split("?")[0]] = page.locator(".chart[data-figure]").count()
        page.wait_for_function(CHARTS_DRAWN_JS, timeout=20_000)  # after the polls' swaps too
        for iso, *texts in page.evaluate(TIMES_JS):
            local = datetime.fromisoformat(iso).astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z")
            times.extend((path, text, local) for text in texts if EXACT_TIME.fullmatch(text))
        if path == "/jobs/":
            axis_ends.extend((path, end) for end in page.evaluate(AXIS_ENDS_JS))
        for href in page.eval_on_selector_all("main a[href]", LINKS_JS):
            if (detail := DETAIL.fullmatch(href)) and detail[1] not in details:
                details[detail[1]] = href

    def visit(path: str) -> None:
        response = page.goto(base + path)
        page.wait_for_load_state("networkidle")
        statuses[path] = response.status
        if response.status == 200:
            check(path)
        if path == "/jobs/":
            shots.take(page, "overview")

    check("/jobs/")  # where the login led
    for path in sidebar:
        visit(path)
    for path in list(details.values()):
        visit(path)

    assert details.keys() == {"queues", "jobs", "tasks"}, details
    assert set(statuses.values()) == {200}, statuses
    assert not [r for r in responses if r[0] >= 400] and not problems, (responses, problems)
    assert polled >= 8 and sum(htmx for _, _, htmx in responses) >= polled, (polled, responses)
    # The pages' stylesheet by its hashed name (the manifest) and plotly.js, both served.
    served = [url for status, url, _ in responses if status == 200]
    assert any(re.search(r"/static/dashboards/console\.[0-9a-f]{12}\.css$", url) for url in served), served
    assert any("plotly" in url and url.endswith(".js") for url in served), served
    # Charts: the overview's four, the scheduled job's histogram, the task's three; each one drawn (waited above).
    assert charts["/jobs/"] == 4 and charts["/jobs/scheduled/"] == 1 and charts["/jobs/tasks/shop.note/"] == 3, charts
    # Exact times (on the page or on hover) in the browser's zone, on every page that shows one, the first too.
    assert times and all(shown == local for _, shown, local in times), times
    assert {shown.rsplit(" ", 1)[1] for _, shown, _ in times} == {"IST"}, times
    assert {path for path, _, _ in times} >= {"/jobs/jobs/", "/jobs/scheduled/"}, times
    now = datetime.now(zone).replace(tzinfo=None)
    assert len(axis_ends) == 8 and all(
        abs(datetime.fromisoformat(end) - now) < timedelta(minutes=10) for _, end in axis_ends
    ), (now, axis_ends)
