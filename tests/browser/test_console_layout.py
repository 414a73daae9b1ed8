"""The console's layout at a desktop's 1,440 x 900: no page is wider than the window (the Scheduled page was
1,508 px and scrolled sideways); a wide table scrolls inside its own container instead of widening the page or
being clipped. Real data: the shop's jobs run by a real worker (dead letters with tracebacks, retries waiting
for their backoff), and scheduled jobs with long keys and parameters."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import redis

from jobconsole.core import JobSpec, JobState, default_registry, task
from tests.browser.console_helpers import (
    SHOP_DEAD,
    SHOP_QUEUES,
    dark,
    enqueue_shop,
    sidebar,
    wait_for_dead_letters,
    wait_for_state,
)
from tests.browser.support import ConsoleUsers, LiveConsole, Visitor, Workers
from tests.helpers import run_burst

pytestmark = pytest.mark.timeout(300)
DESKTOP = 1440
LONG_QUEUE = "reconciliation-monthly-finance-team-emea"
URL = "https://payments.example.com/v2/customers/" + "/".join(f"segment-{n}" for n in range(12)) + "?retry=true"


@task(name="tests.layout_refused", queue=LONG_QUEUE, max_retries=5, retry_delay=3600)
def layout_refused(n: int) -> None:
    """Fails with a long, unbroken message (a URL), then waits an hour to retry: the widest cells an operator
    meets, on the Scheduled page among others."""
    raise ConnectionError(f"upstream refused {URL}")


def _width(tab: Visitor) -> int:
    return int(tab.page.evaluate("document.scrollingElement.scrollWidth"))


def _clipped_tables(tab: Visitor) -> list[str]:
    """Tables wider than their box or the window, not inside a container that scrolls sideways (cut off)."""
    return list(
        tab.page.evaluate(
            """() => [...document.querySelectorAll('main table')].filter(t => {
                 const wrap = t.closest('.table-wrap');
                 if (wrap && ['auto', 'scroll'].includes(getComputedStyle(wrap).overflowX)) return false;
                 const right = t.getBoundingClientRect().right;
                 return right > t.parentElement.getBoundingClientRect().right + 1 || right > window.innerWidth;
               }).map(t => t.id || t.className || t.parentElement.className || 'a table')"""
        )
    )


def test_every_page_fits_a_1440_px_window_and_wide_tables_scroll_in_their_own_box(
    visitor: Callable[..., Visitor],
    console_server: LiveConsole,
    console_users: ConsoleUsers,
    workers: Workers,
    r: redis.Redis,
) -> None:
    client = console_server.client
    worker = workers.start("w1", queues=",".join(SHOP_QUEUES))
    shop = enqueue_shop(client)
    run_at = datetime.now(UTC) + timedelta(minutes=20)
    client.enqueue_many(
        [
            JobSpec(
                task="examples.send_welcome_email",
                params={"to": f"someone.with.a.rather.long.address.{n}@subdomain.example.com"},
                unique_key=f"welcome-campaign-2026-11-27-customer-{n:06d}-with-a-long-unique-key",
                run_at=run_at + timedelta(minutes=n),
            )
            for n in range(8)
        ]
    )
    # A long, unbroken error message (a URL) and a long queue name: the widest cells an operator meets.
    for n in range(3):
        client.enqueue("tests.layout_refused", {"n": n})
    run_burst(r, default_registry, [LONG_QUEUE])  # each fails once, then waits an hour to retry
    wait_for_dead_letters(SHOP_DEAD, 60, worker)
    wait_for_state(client, shop.report, JobState.RUNNING, 30, worker.output)

    tab = visitor(console_users.admin)
    tab.visit("/")
    pages = [path for _, path in sidebar(tab)]
    pages += ["/queues/emails/", f"/jobs/{shop.unknown_customer}/", f"/jobs/{shop.report}/", "/scheduled/?range=day"]
    wide: dict[str, int] = {}
    clipped: dict[str, list[str]] = {}
    for scheme in ("light", "dark"):
        dark(tab, scheme == "dark")
        for path in pages:
            response = tab.visit(path, f"{path.strip('/').replace('/', '-')[:40] or 'overview'}-{scheme}")
            assert response is not None and response.status == 200, path
            if _width(tab) > DESKTOP:
                wide[f"{path} ({scheme})"] = _width(tab)
            if found := _clipped_tables(tab):
                clipped[f"{path} ({scheme})"] = found
            if path.startswith("/scheduled/"):  # its table fits: every row's Run now and Delete in sight
                hidden = tab.page.evaluate(
                    "(w => w.scrollWidth - w.clientWidth)(document.querySelector('#scheduled').closest('.table-wrap'))"
                )
                assert hidden <= 0, f"the Scheduled table scrolls {hidden} px past its box ({scheme})"
    assert not wide, f"pages wider than {DESKTOP} px: {wide}"
    assert not clipped, f"tables cut off at the window's edge: {clipped}"
    tab.assert_no_browser_errors()
