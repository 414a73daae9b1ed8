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

    # A pause and its resume two minutes apart, marked on the overview's charts (their labels must not overlap).
    from django.utils import timezone

    from jobconsole.models import AuditLog

    now = timezone.now()
    for action, minutes in (("pause", 20), ("resume", 18)):
        row = AuditLog.objects.create(actor="operator", action=action, queue="emails", count=1)
        AuditLog.objects.filter(pk=row.pk).update(at=now - timedelta(minutes=minutes))

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


PHONE = {"width": 390, "height": 844}


def test_on_a_phone_the_navigation_folds_tables_stack_and_charts_have_no_toolbar(
    visitor: Callable[..., Visitor], console_server: LiveConsole, console_users: ConsoleUsers, r: redis.Redis
) -> None:
    client = console_server.client
    enqueue_shop(client)
    for n in range(2):
        client.enqueue("tests.layout_refused", {"n": n})
    run_burst(r, default_registry, [LONG_QUEUE])  # retrying, with a long error message

    desktop = visitor(console_users.operator)
    desktop.visit("/", "overview-desktop")
    assert not desktop.page.locator(".nav-toggle").is_visible() and desktop.page.locator(".nav").is_visible()
    # On a desktop plotly's toolbar shows only while the pointer is over a chart.
    assert desktop.page.locator("#chart-depth .modebar-container").count() == 1
    assert desktop.page.locator("#chart-depth .modebar.modebar--hover").count() == 1  # plotly hides it till then

    for scheme in ("light", "dark"):
        tab = visitor(console_users.operator)
        dark(tab, scheme == "dark")
        tab.page.set_viewport_size(PHONE)
        tab.visit("/", f"overview-phone-{scheme}")
        toggle = tab.page.locator(".nav-toggle")
        assert toggle.is_visible() and not tab.page.locator(".nav").is_visible(), "the navigation is not folded"
        assert tab.page.locator("#chart-depth .main-svg").count() > 0
        assert tab.page.locator(".chart .modebar").count() == 0, "plotly's toolbar is on a phone's chart"
        tab.click(".nav-toggle", f"menu-open-{scheme}")
        assert toggle.get_attribute("aria-expanded") == "true" and tab.page.locator(".nav").is_visible()
        tab.page.locator(".nav a", has_text="Scheduled").click()
        tab.page.wait_for_url(tab.url("/scheduled/"))
        tab.screenshot(f"scheduled-phone-{scheme}")
        assert not tab.page.locator(".nav").is_visible()  # a new page: folded again
        # Rows stack: the header is out of sight, each cell shows its column's name before its value.
        head = tab.page.locator("#scheduled thead").bounding_box()  # kept for screen readers, 1 px
        assert head is not None and head["height"] <= 1 and head["width"] <= 1
        cell = tab.page.locator("#scheduled tbody tr").first.locator("td").nth(1)
        assert cell.get_attribute("data-label") == "Task"
        before = cell.evaluate("el => getComputedStyle(el, '::before').content")
        assert before == '"Task"', before
        row = tab.page.locator("#scheduled tbody tr").first.bounding_box()
        assert row is not None and row["width"] <= PHONE["width"]
        for path in ("/", "/queues/", "/jobs/", "/scheduled/", "/dead/", "/workers/", "/queues/emails/"):
            tab.visit(path, f"{path.strip('/').replace('/', '-') or 'overview'}-phone-{scheme}")
            width = _width(tab)
            assert width <= PHONE["width"], f"{path} is {width} px wide on a {PHONE['width']} px phone ({scheme})"
        tab.assert_no_browser_errors()
