"""The objects the browser-test fixtures (conftest.py) hand to tests: the live console, its users, worker
processes, and browser tabs that screenshot every page they load."""

import contextlib
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest

from jobconsole.core import Client
from tests.conftest import PROJECT, PYTHON, manage_env

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def database_url() -> str:
    """The test database as a DATABASE_URL, for the subprocesses (workers) to use the same one."""
    from django.db import connection

    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    if connection.vendor == "postgresql":
        auth = f"{quote(s['USER'] or '')}:{quote(s['PASSWORD'] or '')}@" if s["USER"] else ""
        return f"postgres://{auth}{s['HOST'] or 'localhost'}:{s['PORT'] or 5432}/{s['NAME']}"
    raise NotImplementedError(f"no DATABASE_URL for a {connection.vendor} test database")


@dataclass
class LiveConsole:
    url: str
    client: Client
    redis_url: str
    database_url: str


@dataclass
class ConsoleUsers:
    password: str
    operator: "User | None" = None
    viewer: "User | None" = None
    admin: "User | None" = None

    def make(self, username: str, *codenames: str, superuser: bool = False) -> "User":
        """A staff user with these jobconsole permissions (codenames such as 'view_job', 'operate_queue')."""
        from django.contrib.auth.models import Permission, User

        user = User.objects.create_user(username, f"{username}@example.com", self.password, is_staff=True)
        user.is_superuser = superuser
        user.save()
        perms = Permission.objects.filter(content_type__app_label="jobconsole", codename__in=codenames)
        missing = set(codenames) - set(perms.values_list("codename", flat=True))
        assert not missing, f"no such jobconsole permissions: {sorted(missing)}"
        user.user_permissions.set(perms)
        return user


@dataclass
class Proc:
    name: str
    popen: "subprocess.Popen[bytes]"
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL, as a crash: its running jobs come back when their leases run out. A runworker with the mirror
        is a supervisor of worker processes (management/processes.py): they are killed first, so that none is
        started again nor stops gracefully when the supervisor is gone."""
        for pid in re.findall(r"runworker started pid=(\d+) ", self.output()):
            if int(pid) != self.popen.pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        self.popen.kill()
        self.popen.wait(timeout=10)

    def terminate(self, timeout: float = 20) -> int:
        self.popen.send_signal(signal.SIGTERM)
        return self.popen.wait(timeout=timeout)


@dataclass
class Workers:
    console: LiveConsole
    tmp_path: Path
    started: list[Proc] = field(default_factory=list)

    def start(self, name: str = "w1", queues: str = "", *args: str, **env: str) -> Proc:
        """A `manage.py runworker --name NAME` (with the database mirror) on the test Redis and database,
        returned once it registered. `queues`: comma-separated (default: every registered task's); `args`: more
        runworker options; `env`: more environment variables."""
        log = self.tmp_path / f"worker-{name}.log"
        environ = manage_env(self.console.redis_url, self.tmp_path, DATABASE_URL=self.console.database_url, **env)
        (self.tmp_path / "var").mkdir(exist_ok=True)
        command = [PYTHON, str(PROJECT / "manage.py"), "runworker", "--name", name, *args]
        if queues:
            command += ["--queues", queues]
        with log.open("wb") as out:
            popen = subprocess.Popen(command, cwd=PROJECT, env=environ, stdout=out, stderr=subprocess.STDOUT)
        proc = Proc(name, popen, log)
        self.started.append(proc)
        deadline = time.monotonic() + 30
        while f"worker={name} started" not in proc.output():
            if popen.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"worker {name} did not start (exit {popen.poll()}):\n{proc.output()[-4000:]}")
            time.sleep(0.05)
        return proc

    def kill_all(self) -> None:
        for proc in self.started:
            if proc.popen.poll() is None:
                proc.popen.kill()
        for proc in self.started:
            proc.popen.wait(timeout=10)


@dataclass
class Screenshots:
    """One test's screenshots: var/screenshots/<module>.<test>/NN-name.png, numbered across its tabs."""

    directory: Path
    taken: list[Path] = field(default_factory=list)

    def take(self, page: Any, name: str) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.directory / f"{len(self.taken) + 1:02d}-{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)[:80]}.png"
        page.screenshot(path=str(target), full_page=True, animations="disabled")
        self.taken.append(target)
        return target


class Visitor:
    """One browser tab on the live console that saves a full-page screenshot of every page it shows: `visit()`
    and `click()` once the page settled; a page reached some other way (a `page.click` of the test's own) before
    the tab's next `visit`, `click`, `login` or `screenshot`, and at the end of the test. (Never from inside a
    Playwright event handler: that runs beside the test's next step and races its navigation.)"""

    def __init__(self, context: Any, console: LiveConsole, shots: Screenshots, user: "User | None" = None) -> None:
        self.context = context
        self.console = console
        self.shots = shots
        self.user = user
        self.page = context.new_page()
        # Console errors (a CSP violation is one), uncaught exceptions, and responses of 400 or more.
        self.errors: list[str] = []
        self.unshot = False  # a page loaded since the last screenshot
        self.page.on("console", self._on_console)
        self.page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        self.page.on(
            "response", lambda r: r.status >= 400 and self.errors.append(f"{r.status} {r.request.method} {r.url}")
        )
        self.page.on("load", lambda page: setattr(self, "unshot", True))

    def url(self, path: str) -> str:
        return self.console.url + path

    def visit(self, path: str, name: str = "") -> Any:
        """Load `path` (e.g. "/queues/?state=dead"), wait for it to settle, save its screenshot; returns the
        response."""
        self.flush()
        response = self.page.goto(self.url(path))
        self.page.wait_for_load_state("networkidle")
        self.screenshot(name)
        return response

    def click(self, selector: str, name: str = "") -> None:
        """Click `selector` (a link, a button), wait for what it loads to settle, and save a screenshot."""
        self.flush()
        self.page.click(selector)
        self.page.wait_for_load_state("networkidle")
        self.screenshot(name)

    def screenshot(self, name: str = "") -> Path:
        """Save the whole page now (name: the URL's path by default, after the user's name)."""
        if not name:
            name = re.sub(r"^https?://[^/]+", "", self.page.url).split("?")[0].strip("/") or "overview"
        self.unshot = False
        return self.shots.take(self.page, f"{self.user.username}-{name}" if self.user is not None else name)

    def flush(self) -> None:
        """Save the page on show if it loaded since the last screenshot."""
        if self.unshot:
            self.screenshot()

    def login(self, username: str, password: str) -> None:
        """Through the admin's login page (where the console sent an anonymous visitor, or afresh), as a person
        would; ends, with a screenshot, where the login page's `next` leads (the overview by default)."""
        if not self.page.url.startswith(self.url("/admin/login/")):
            self.visit("/admin/login/?next=/")
        self.page.fill("#id_username", username)
        self.page.fill("#id_password", password)
        with self.page.expect_navigation():
            self.page.click("input[type=submit]")
        self.page.wait_for_load_state("networkidle")
        self.screenshot()

    def post(self, path: str, form: dict[str, Any]) -> Any:
        """POST a form with this tab's session and CSRF token but without its page: what a user who has no
        button for an action could still try. Visit a page with a form first (it sets the CSRF cookie)."""
        from django.conf import settings

        token = next((c["value"] for c in self.context.cookies() if c["name"] == settings.CSRF_COOKIE_NAME), "")
        assert token, "no CSRF cookie yet: visit a page with a form first"
        return self.page.request.post(self.url(path), form=form, headers={"X-CSRFToken": token})

    def _on_console(self, message: Any) -> None:
        # "Failed to load resource" repeats a failed response, which the response handler names with its URL.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            self.errors.append(f"console: {message.text}")

    def assert_no_browser_errors(self, allow: tuple[str, ...] = ()) -> None:
        """No console error, uncaught exception or failed response, except those naming one of `allow`."""
        errors = [e for e in self.errors if not any(a in e for a in allow)]
        assert not errors, f"the browser reported errors: {errors}"


def login_cookie(context: Any, console: LiveConsole, user: "User") -> None:
    """Log `user` in without the form (a session made by Django's test client), to save each test a login."""
    from django.conf import settings
    from django.test import Client as DjangoClient

    client = DjangoClient()
    client.force_login(user)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": console.url}])
