"""Browser tests: Playwright drives Debian's chromium (/usr/bin/chromium, never a browser Playwright downloads)
against Django's live server, the session's real redis-server and the real test database, with real
`manage.py runworker` processes. Every test here is marked `browser`; they run in `make test`, and are skipped
only when /usr/bin/chromium is missing (scripts/bootstrap.sh installs it as root on Debian).

Fixtures:
- `chromium`: the playwright Browser (started once for all the browser tests in a row).
(The classes are in tests/browser/support.py.)
- `console_server`: the live console: `.url` (http://localhost:PORT), `.client` (an engine Client on the test
  Redis, flushed for the test, to seed jobs), `.redis_url`, `.database_url` (what subprocesses connect to).
- `console_users`: `.operator` (view and operate permissions), `.viewer` (view only), `.admin` (superuser),
  `.password` (theirs), `.make(username, *codenames)` for other sets; all staff, so the admin login works.
- `workers`: `.start(name="w1", queues="")` starts a runworker and returns once it registered (a `Proc`:
  `.pid`, `.output()`, `.kill()`, `.terminate()`); every worker is killed at teardown. `worker`: one started.
- `visitor`: `visitor(user=None)` opens a new browser tab (a `Visitor`), logged in as `user` if given.
  `operator`, `viewer`: a Visitor logged in as that user.

A Visitor saves a full-page screenshot of every page it shows (`visit`, `click`, `screenshot("name")`, a page
reached otherwise before its next step, and the last one when a test fails) under
var/screenshots/<module>.<test>/NN-<user>-<page>.png; the directory is printed at the end of the run.
"""

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import tests.tasks  # noqa: F401  (registers the test tasks, so the client enqueues them)
from jobconsole.core import Client
from tests.browser.support import (
    ConsoleUsers,
    LiveConsole,
    Proc,
    Screenshots,
    Visitor,
    Workers,
    database_url,
    login_cookie,
)
from tests.conftest import PROJECT

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = PROJECT / "var" / "screenshots"
BROWSER_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if BROWSER_DIR in Path(item.path).parents:
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    report = yield
    if report.when == "call":
        item.stash[FAILED] = report.failed  # for the Visitor's teardown: a screenshot of the failure
    return report


FAILED = pytest.StashKey[bool]()
_shot_dirs: set[Path] = set()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _shot_dirs:
        terminalreporter.write_line(f"browser screenshots: {SCREENSHOTS} ({len(_shot_dirs)} tests)")


# --- the browser -------------------------------------------------------------------------------------------


class Chromium:
    """Playwright and its chromium, started for the first browser test and stopped after the last one: while
    Playwright's sync API runs it keeps an asyncio loop in this thread, which Django takes for an async context
    (so its ORM refuses to run) in every test after, browser or not."""

    def __init__(self) -> None:
        self._playwright: Any = None
        self.browser: Any = None

    def start(self) -> Any:
        if self.browser is None:
            from playwright.sync_api import sync_playwright

            # The browser tests call the ORM between page actions, synchronously: tell Django so.
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
            self._playwright = sync_playwright().start()
            self.browser = self._playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
            )
        return self.browser

    def stop(self) -> None:
        if self._playwright is not None:
            self.browser.close()
            self._playwright.stop()
            self._playwright = self.browser = None
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


_chromium = Chromium()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield  # the test's fixtures (its browser tabs) are torn down by now
    if nextitem is None or BROWSER_DIR not in Path(nextitem.path).parents:
        _chromium.stop()


@pytest.fixture
def chromium() -> Any:
    """The playwright Browser (Debian's chromium, headless)."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is missing: scripts/bootstrap.sh installs it as root on Debian (apt-get install chromium)"
        )
    return _chromium.start()


# --- the server, its database and Redis --------------------------------------------------------------------


@pytest.fixture
def console_server(live_server: Any, settings: Any, r: "redis.Redis", redis_url: str) -> LiveConsole:
    """Django's live server (a thread of this process, so it shares the test database and these settings)."""
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": redis_url}
    return LiveConsole(live_server.url, Client(r), redis_url, database_url())


# --- users ---------------------------------------------------------------------------------------------------


@pytest.fixture
def console_users(console_server: LiveConsole, settings: Any) -> ConsoleUsers:
    from django.contrib.auth.models import Permission

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast, for tests only
    codenames = set(Permission.objects.filter(content_type__app_label="jobconsole").values_list("codename", flat=True))
    view = sorted(c for c in codenames if c.startswith("view_"))
    operate = sorted(c for c in codenames if c.startswith("operate_"))
    users = ConsoleUsers(password="browser-test-password")
    users.viewer = users.make("viewer", *view)
    users.operator = users.make("operator", *view, *operate)
    users.admin = users.make("admin", superuser=True)
    return users


# --- workers ---------------------------------------------------------------------------------------------------


@pytest.fixture
def workers(console_server: LiveConsole, tmp_path: Path) -> Iterator[Workers]:
    started = Workers(console_server, tmp_path)
    try:
        yield started
    finally:
        started.kill_all()


@pytest.fixture
def worker(workers: Workers) -> Proc:
    return workers.start("w1")


# --- browser tabs ---------------------------------------------------------------------------------------------


@pytest.fixture
def visitor(
    chromium: Any, console_server: LiveConsole, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Visitor]]:
    test = f"{Path(str(request.node.path)).stem}.{re.sub(r'[^A-Za-z0-9_.-]+', '_', request.node.name)}"
    shots = Screenshots(SCREENSHOTS / test)
    shutil.rmtree(shots.directory, ignore_errors=True)  # this test's screenshots of an earlier run
    opened: list[Visitor] = []

    def open_tab(user: Any = None, **options: Any) -> Visitor:
        """A tab in a browser context of its own (`options`: Playwright's, such as java_script_enabled)."""
        context = chromium.new_context(viewport={"width": 1440, "height": 900}, **options)
        context.set_default_timeout(60_000)  # Playwright's 30 s is short on a loaded 2-core machine
        if user is not None:
            login_cookie(context, console_server, user)
        opened.append(Visitor(context, console_server, shots, user))
        return opened[-1]

    yield open_tab
    failed = request.node.stash.get(FAILED, False)
    for tab in opened:
        try:
            if failed and tab is opened[-1]:
                tab.screenshot("failed")
            else:
                tab.flush()
        except Exception:  # noqa: BLE001 - the page may be gone; the test's own outcome is what matters
            pass
        tab.context.close()
    if shots.taken:
        _shot_dirs.add(shots.directory)


@pytest.fixture
def operator(visitor: Callable[..., Visitor], console_users: ConsoleUsers) -> Visitor:
    return visitor(console_users.operator)


@pytest.fixture
def viewer(visitor: Callable[..., Visitor], console_users: ConsoleUsers) -> Visitor:
    return visitor(console_users.viewer)
