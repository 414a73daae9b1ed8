"""How the console behaves in a real browser beyond what a page shows: live parts poll only while the operator
can see them (no requests from a hidden tab), and the pages and their actions work with JavaScript off."""

from collections.abc import Callable
from typing import Any

import pytest

from jobconsole.core import JobState
from tests.browser.console_helpers import wait_for_state
from tests.browser.support import ConsoleUsers, LiveConsole, Proc, Visitor

pytestmark = pytest.mark.timeout(300)

QUEUE = "examples.echo"


def _polls(tab: Visitor, seconds: float) -> int:
    """The htmx polls of the workers page's live part the tab makes in `seconds` (it asks every 3 s)."""
    seen: list[str] = []

    def note(request: Any) -> None:
        if request.headers.get("hx-request") == "true" and "/workers/" in request.url:
            seen.append(request.url)

    tab.page.on("request", note)
    tab.page.wait_for_timeout(seconds * 1000)
    tab.page.remove_listener("request", note)
    return len(seen)


def _hide(tab: Visitor, hidden: bool) -> None:
    """What the browser tells a page when its tab goes to the background (or comes back)."""
    tab.page.evaluate(
        """hidden => {
            const state = hidden ? "hidden" : "visible";
            Object.defineProperty(document, "hidden", {value: hidden, configurable: true});
            Object.defineProperty(document, "visibilityState", {value: state, configurable: true});
            document.dispatchEvent(new Event("visibilitychange"));
        }""",
        hidden,
    )


def test_live_parts_poll_while_visible_and_not_while_the_tab_is_hidden(operator: Visitor) -> None:
    # The part asks every 3 s (the next one 3 s after its answer is swapped in): 7.5 s hold at least two timers,
    # and at least one request even when a loaded machine answers slowly.
    operator.visit("/workers/", "workers-polling")
    assert _polls(operator, 7.5) >= 1
    _hide(operator, True)
    operator.page.wait_for_timeout(500)  # a poll already under way may finish
    assert _polls(operator, 7.5) == 0  # a background tab costs the server nothing
    _hide(operator, False)
    assert _polls(operator, 7.5) >= 1  # and it picks up again when the operator comes back
    operator.assert_no_browser_errors()


def test_pages_and_actions_work_without_javascript(
    visitor: Callable[..., Visitor], console_users: ConsoleUsers, console_server: LiveConsole, worker: Proc
) -> None:
    client = console_server.client
    done = client.enqueue(QUEUE, {"n": 0}).id
    wait_for_state(client, done, JobState.COMPLETED, 30, worker.output)
    tab = visitor(console_users.operator, java_script_enabled=False)
    for path in ("/", "/queues/", "/jobs/", "/running/", "/scheduled/", "/dead/", "/workers/", "/tasks/", "/audit/"):
        response = tab.visit(path, f"nojs-{path.strip('/') or 'overview'}")
        assert response.status == 200, path
        assert tab.page.locator("main h1").count() == 1, path
    tab.visit("/", "nojs-overview-charts")
    assert "Charts need JavaScript" in tab.page.locator("main").inner_text()  # said, not a blank box
    # The numbers are there without a script: the queue that ran a job is listed.
    assert tab.page.locator(f"#queues a[href='/queues/{QUEUE}/']").count() == 1

    # An action is a plain form POST: without the script's confirmation dialog, the server still does it.
    tab.visit(f"/queues/{QUEUE}/", "nojs-queue")
    tab.click("button:has-text('Pause queue')", "nojs-queue-paused")
    assert client.queries.queues.is_paused(QUEUE) and "paused" in tab.page.locator(".messages").inner_text()
    tab.click("button:has-text('Resume queue')", "nojs-queue-resumed")
    assert not client.queries.queues.is_paused(QUEUE)
    held = client.enqueue(QUEUE, {"n": 1}).id
    wait_for_state(client, held, JobState.COMPLETED, 30, worker.output)
    tab.assert_no_browser_errors()
