"""The console as an operator sees it, in a real browser against the live server, a real worker and Redis: a
login through the admin's page, every page of the sidebar in light and dark and the overview on a phone, each
without a browser error (a Content-Security-Policy violation is one); the keyboard reaches the navigation and a
page's primary action."""

import re
from collections.abc import Callable

from jobconsole.core import JobState
from tests.browser.console_helpers import (
    SHOP_DEAD,
    accept_dialogs,
    background_luminance,
    dark,
    enqueue_shop,
    sidebar,
    wait_for_dead_letters,
    wait_for_state,
)
from tests.browser.support import ConsoleUsers, LiveConsole, Proc, Visitor

# Every console page of the sidebar; more may come (each is checked), none of these may go.
PAGES = {"/": "Overview", "/queues/": "Queues", "/jobs/": "Jobs", "/running/": "Running",
         "/scheduled/": "Scheduled", "/dead/": "Dead letters", "/workers/": "Workers", "/audit/": "Audit log"}  # fmt: skip
PHONE = {"width": 390, "height": 844}


def _slug(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.strip("/").lower()) or "overview"


def test_log_in_and_every_page_loads_light_dark_and_on_a_phone(
    visitor: Callable[..., Visitor], console_server: LiveConsole, console_users: ConsoleUsers, worker: Proc
) -> None:
    client = console_server.client
    shop = enqueue_shop(client)
    report = shop.report
    wait_for_dead_letters(SHOP_DEAD, 60, worker)
    wait_for_state(client, report, JobState.RUNNING, 30, worker.output)
    dead = client.get(shop.unknown_customer)  # a KeyError with a traceback
    assert dead.state is JobState.DEAD

    tab = visitor()
    tab.visit("/")
    assert tab.page.url.startswith(tab.url("/admin/login/?next=/")), "an anonymous visitor is sent to log in"
    tab.login("admin", console_users.password)
    assert tab.page.url == tab.url("/")
    assert tab.page.locator("h1").inner_text() == "Overview"

    pages = dict((path, label) for label, path in sidebar(tab))
    assert pages.items() >= PAGES.items(), f"the sidebar lost pages: {pages}"
    # Pages reached from those: a queue, a dead job with its traceback, the running report with its progress.
    pages |= {"/queues/emails/": "Queue emails", f"/jobs/{dead.id}/": "Job (dead)", f"/jobs/{report}/": "Job (running)"}

    for scheme in ("light", "dark"):
        dark(tab, scheme == "dark")
        for path, label in pages.items():
            response = tab.visit(path, f"{_slug(path)}-{scheme}")
            assert response is not None and response.status == 200, f"{label}: {response and response.status}"
            assert tab.page.url == tab.url(path), f"{label} redirected to {tab.page.url}"
            assert tab.page.locator("main h1").count() == 1, f"{label} has no heading"
            current = tab.page.locator(".sidebar .nav a[aria-current=page]")
            if path in PAGES:
                assert current.inner_text().strip() == label, f"{label} is not marked in the sidebar"
        luminance = background_luminance(tab)
        assert luminance < 0.1 if scheme == "dark" else luminance > 0.9, f"{scheme} background: {luminance:.2f}"
        assert background_luminance(tab, ".panel") < 0.2 if scheme == "dark" else True

    dark(tab, False)
    tab.page.set_viewport_size(PHONE)
    tab.visit("/", "overview-phone")
    overflow = tab.page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"the overview is {overflow}px wider than a phone"
    tab.assert_no_browser_errors()

    # The check above can fail: a script the page did not ship breaks the Content-Security-Policy, and counts.
    tab.page.evaluate("""() => { const s = document.createElement("script"); s.textContent = "window.injected = 1";
                                 document.body.appendChild(s); }""")
    tab.page.wait_for_timeout(200)
    assert tab.page.evaluate("window.injected") is None
    assert any("Content Security Policy" in error for error in tab.errors), tab.errors


def test_keyboard_reaches_the_navigation_and_a_primary_action(
    operator: Visitor, console_server: LiveConsole, worker: Proc
) -> None:
    job = console_server.client.enqueue("examples.echo", {"greeting": "keyboard"})
    wait_for_state(console_server.client, job.id, JobState.COMPLETED, 30, worker.output)
    operator.visit("/")

    def tab_to(selector: str, limit: int = 40) -> None:
        target = operator.page.locator(selector)
        for _ in range(limit):
            operator.page.keyboard.press("Tab")
            if target.evaluate("el => el === document.activeElement"):
                style = target.evaluate("el => getComputedStyle(el).outlineStyle")
                assert style != "none", f"{selector} has focus but no visible focus ring"
                return
        raise AssertionError(f"{limit} presses of Tab never reached {selector}")

    tab_to(".skip")  # the first stop: skip to the content
    tab_to(".sidebar a[href='/queues/']")
    operator.page.keyboard.press("Enter")
    operator.page.wait_for_url(operator.url("/queues/"))
    operator.screenshot("keyboard-queues")

    operator.visit("/queues/examples.echo/", "keyboard-queue")
    asked = accept_dialogs(operator)
    tab_to("button[value=pause]")
    with operator.page.expect_navigation():
        operator.page.keyboard.press("Enter")
    operator.page.wait_for_load_state("networkidle")
    operator.screenshot("keyboard-paused")
    assert asked and asked[0].startswith("Pause examples.echo?")
    assert console_server.client.queries.is_paused("examples.echo")
    assert operator.page.locator("button[value=resume]").count() == 1
    operator.assert_no_browser_errors()
