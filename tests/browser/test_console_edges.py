"""Issue 30's rough edges, as an operator meets them in the browser on the shop's real jobs: a queue's own charts
drawn and its state tabs counted, the dead letters' total with paging, a resubmitted dead letter that says its
new run failed again (and links to it), a task's options in words, and the audit log's queue filter and its
selections as phrases; on a 1,440 px desktop, a phone and in dark mode, never wider than the window."""

from collections.abc import Callable

import pytest

from jobconsole.models import DeadLetter
from tests.browser.console_helpers import (
    SHOP_DEAD,
    SHOP_QUEUES,
    accept_dialogs,
    dark,
    enqueue_shop,
    wait_for_dead_letters,
)
from tests.browser.support import ConsoleUsers, LiveConsole, Visitor, Workers
from tests.live import wait_until

pytestmark = pytest.mark.timeout(300)
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}
CHARTS_DRAWN = """ids => ids.every(id => document.querySelector(`#${id} .main-svg`))"""


def _width(tab: Visitor) -> int:
    return int(tab.page.evaluate("document.scrollingElement.scrollWidth"))


def test_queue_charts_tab_counts_dead_letter_totals_reruns_options_and_audit_phrases(
    visitor: Callable[..., Visitor], console_server: LiveConsole, console_users: ConsoleUsers, workers: Workers
) -> None:
    worker = workers.start("w1", queues=",".join(SHOP_QUEUES))
    shop = enqueue_shop(console_server.client)  # six die at once: three bounced emails among them
    wait_for_dead_letters(SHOP_DEAD, 60, worker)
    tab = visitor(console_users.operator)
    asked = accept_dialogs(tab)
    tab.page.set_viewport_size(DESKTOP)

    # A queue's page: the overview's charts, of this queue alone, drawn by plotly; each state tab with its count.
    tab.visit("/queues/emails/", "queue-emails")
    tab.page.wait_for_function(CHARTS_DRAWN, arg=["chart-depth", "chart-throughput"], timeout=15_000)
    dead_tab = tab.page.locator("nav[aria-label=State] a", has_text="dead")
    assert dead_tab.locator(".tab-count").inner_text() == "3"  # the three bounced welcome emails
    dead_tab.click()
    tab.page.wait_for_url("**/queues/emails/?state=dead*")
    assert tab.page.locator("#queue-live tbody tr").count() == 3
    assert "3 shown of 3" in tab.page.locator("#queue-live .pager").inner_text()
    tab.click("button:has-text('Pause queue')", "queue-emails-paused")  # for the audit log below
    tab.click("button:has-text('Resume queue')")
    assert asked[-2:] == [
        "Pause emails? Workers will take nothing from it until it is resumed.",
        "Resume emails?",
    ]

    # Dead letters: the total, not "6 shown".
    tab.visit("/dead/", "dead-letters")
    pager = tab.page.locator("#dead-letter-list .pager").inner_text()
    assert pager.startswith(f"1\N{EN DASH}{SHOP_DEAD} of {SHOP_DEAD} dead letters"), pager

    # Resubmit one whose cause is not fixed: its row says the new run failed again, and links to its attempts.
    tab.visit(f"/jobs/{shop.unknown_customer}/")
    tab.click("button:has-text('Retry')", "unknown-customer-retried")
    wait_until(
        lambda: DeadLetter.objects.filter(job_id=shop.unknown_customer).count() == 2, 60, "the second death mirrored",
        worker.output,
    )  # fmt: skip
    tab.visit("/dead/?status=resubmitted", "dead-letters-resubmitted")
    outcome = tab.page.locator("#dead-letter-list .rerun a")
    assert outcome.inner_text() == "failed again"
    outcome.click()
    tab.page.wait_for_url(f"**/jobs/{shop.unknown_customer}/#attempts")
    assert tab.page.locator("#attempts tbody tr").count() == 2

    # A task's options as an operator reads them.
    tab.visit("/tasks/examples.charge_card/", "task-options")
    options = tab.page.locator("section.panel", has=tab.page.locator("h2", has_text="Options")).inner_text()
    assert "Time limit\nno limit" in options.replace("\t", "\n") and "Retried on" in options
    for python in ("None", "['", "True", "False"):
        assert python not in options, python

    # The audit log: the known queues offered, the pause's queue as a phrase.
    tab.visit("/audit/", "audit")
    offered = tab.page.locator("select[name=queue] option").all_inner_texts()
    assert {"any", *SHOP_QUEUES} <= set(offered)
    tab.page.select_option("select[name=queue]", "emails")
    tab.click("button:has-text('Filter')", "audit-emails")
    assert "queue=emails" in tab.page.url
    assert tab.page.locator("main tbody tr", has_text="pause").locator(".chip").first.inner_text() == "queue emails"

    pages = ["/queues/emails/", "/dead/?status=all", "/tasks/examples.charge_card/", "/audit/"]
    for scheme in ("light", "dark"):
        dark(tab, scheme == "dark")
        for size in (DESKTOP, PHONE):
            tab.page.set_viewport_size(size)
            for path in pages:
                tab.visit(path, f"{path.strip('/').split('?')[0].replace('/', '-')}-{size['width']}-{scheme}")
                assert _width(tab) <= size["width"], f"{path} is {_width(tab)} px wide at {size['width']} ({scheme})"
    tab.assert_no_browser_errors()
