"""The console as an operator sees it, in a real browser against the live server, a real worker and Redis: a
login through the admin's page, every page of the sidebar in light and dark and the overview on a phone, each
without a browser error (a Content-Security-Policy violation is one); the keyboard reaches the navigation and a
page's primary action."""

import re
from collections.abc import Callable
from typing import Any, cast

import pytest

from jobconsole.core import JobState
from tests.browser.console_helpers import (
    SHOP_DEAD,
    SHOP_QUEUES,
    accept_dialogs,
    background_luminance,
    dark,
    enqueue_shop,
    sidebar,
    wait_for_dead_letters,
    wait_for_state,
)
from tests.browser.support import ConsoleUsers, LiveConsole, Proc, Visitor, Workers

# Every console page of the sidebar; more may come (each is checked), none of these may go.
PAGES = {"/": "Overview", "/queues/": "Queues", "/jobs/": "Jobs", "/running/": "Running",
         "/scheduled/": "Scheduled", "/dead/": "Dead letters", "/workers/": "Workers", "/tasks/": "Tasks",
         "/flow/": "Flow control", "/schedules/": "Schedules", "/bulk/": "Bulk operations",
         "/audit/": "Audit log", "/workflows/": "Workflows"}  # fmt: skip
CHARTS = ("chart-depth", "chart-throughput", "chart-wait", "chart-run")
PHONE = {"width": 390, "height": 844}

# Pages, workers and a browser on a 2-core machine shared with other work: each test takes 10-60 s when it
# is quiet, three or four times that under load.
pytestmark = pytest.mark.timeout(300)


def _slug(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.strip("/").lower()) or "overview"


def test_log_in_and_every_page_loads_light_dark_and_on_a_phone(
    visitor: Callable[..., Visitor], console_server: LiveConsole, console_users: ConsoleUsers, workers: Workers
) -> None:
    client = console_server.client
    worker = workers.start("w1", queues=",".join(SHOP_QUEUES))
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
    pages |= {"/queues/emails/": "Queue emails", f"/jobs/{dead.id}/": "Job (dead)", f"/jobs/{report}/": "Job (running)",
              "/tasks/examples.charge_card/": "Task examples.charge_card"}  # fmt: skip

    for scheme in ("light", "dark"):
        dark(tab, scheme == "dark")
        for path, label in pages.items():
            if scheme == "dark" and path not in PAGES and "dead" not in label:
                continue  # dark mode is the same stylesheet: the sidebar's pages and a job show it
            response = tab.visit(path, f"{_slug(path)[:40]}-{scheme}")
            assert response is not None and response.status == 200, f"{label}: {response and response.status}"
            assert tab.page.url == tab.url(path), f"{label} redirected to {tab.page.url}"
            assert tab.page.locator("main h1").count() == 1, f"{label} has no heading"
            current = tab.page.locator(".sidebar .nav a[aria-current=page]")
            if path in PAGES:
                assert current.inner_text().strip() == label, f"{label} is not marked in the sidebar"
            if path == "/tasks/" and scheme == "light":  # percentiles of what ran ("—" only when nothing did)
                row = tab.page.locator("main tr:has(a[href^='/tasks/examples.resize_image/'])").inner_text()
                assert "ms" in row, f"no run-time percentiles for a task that ran: {row}"
            if path == "/":
                for chart in CHARTS:
                    assert tab.page.locator(f"#{chart} .main-svg").count() > 0, f"{chart} not drawn ({scheme})"
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
    assert console_server.client.queries.queues.is_paused("examples.echo")
    assert operator.page.locator("button[value=resume]").count() == 1
    operator.assert_no_browser_errors()


def _figure(tab: Visitor, chart: str) -> dict[str, Any]:
    """The plotly figure a chart was drawn from (its json_script beside it)."""
    script = "id => JSON.parse(document.getElementById(document.getElementById(id).dataset.figure).textContent)"
    return cast(dict[str, Any], tab.page.evaluate(script, chart))


def test_the_overview_charts_draw_what_a_worker_did(viewer: Visitor, console_server: LiveConsole, worker: Proc) -> None:
    client = console_server.client
    completed = [client.enqueue("examples.echo", {"n": n}).id for n in range(12)]
    dead = [client.enqueue("examples.fail", {"message": f"boom {n}"}, max_retries=0).id for n in range(3)]
    for job_id in completed:
        wait_for_state(client, job_id, JobState.COMPLETED, 30, worker.output)
    for job_id in dead:
        wait_for_state(client, job_id, JobState.DEAD, 30, worker.output)

    viewer.visit("/", "overview-charts")
    for chart in CHARTS:
        svg = viewer.page.locator(f"#{chart}.chart .main-svg").first
        assert svg.is_visible(), f"{chart} was not drawn"
        assert svg.bounding_box()["height"] > 150, f"{chart} is drawn too small"  # type: ignore[index]
        traces = len(_figure(viewer, chart)["data"])
        assert viewer.page.locator(f"#{chart} .scatterlayer .trace").count() == traces, f"{chart}: traces missing"

    per_minute = {trace["name"]: trace["y"] for trace in _figure(viewer, "chart-throughput")["data"]}
    assert sum(v or 0 for v in per_minute["completed"]) == len(completed), per_minute["completed"]
    assert sum(v or 0 for v in per_minute["dead"]) == len(dead), per_minute["dead"]
    run_time = {trace["name"]: trace["y"] for trace in _figure(viewer, "chart-run")["data"]}
    assert any(v is not None for v in run_time["p50"]), run_time
    # Depth: a line per queue that had jobs waiting when the sampler looked; when none had (these jobs ran at
    # once), one line for every queue, so the chart never shows a legend of flat zeros.
    depth = {trace["name"] for trace in _figure(viewer, "chart-depth")["data"]}
    assert depth == {"every queue"} or depth <= {"examples.echo", "examples.fail", "other queues"}, depth
    # The plotted line of completed jobs climbs off the axis: its path has a point above zero.
    line = viewer.page.locator("#chart-throughput .scatterlayer .trace").first.locator("path.js-line")
    assert line.count() == 1 and len(line.get_attribute("d") or "") > 10

    viewer.click("a[href='?range=day']", "overview-charts-day")
    assert viewer.page.locator("#chart-throughput .main-svg").count() > 0
    viewer.assert_no_browser_errors()
