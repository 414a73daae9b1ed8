"""Workflows in a real browser, after a real worker (with its mirror) ran them: the Workflows page with its
progress bars and filters, a diamond's graph (each job a node, click through to the job and its links), a
fan-out of 500 with a callback collapsed into two nodes, a failed workflow's resubmit (through the bulk preview)
and a running one cancelled from its page; light and dark."""

import time

import pytest

from jobconsole.core import JobSpec
from jobconsole.core.compose import chord
from jobconsole.core.workflows import Step
from tests.browser.console_helpers import accept_dialogs, dark
from tests.browser.support import LiveConsole, Visitor, Workers

pytestmark = pytest.mark.timeout(600)
SHIP = JobSpec(task="examples.fail", params={"message": "carrier down"}, max_retries=0)
TIMES = "\u00d7"  # the sign before a collapsed node's count


def _wait_ended(workflow_ids: list[str], timeout: float, log) -> None:
    from jobconsole.models import Workflow

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = dict(Workflow.objects.filter(id__in=workflow_ids).values_list("id", "state"))
        if len(states) == len(workflow_ids) and "running" not in states.values():
            return
        time.sleep(0.25)
    pytest.fail(f"workflows not ended and mirrored in {timeout} s: {states}\n{log()[-3000:]}")


def test_workflows_pages_after_a_worker_ran_them(
    operator: Visitor, console_server: LiveConsole, workers: Workers
) -> None:
    client = console_server.client
    echo = "examples.echo"
    diamond = client.enqueue_workflow(
        [
            Step("fetch-orders", JobSpec(task=echo, params={"day": "2026-11-27"})),
            Step("render-invoices", JobSpec(task=echo), after=["fetch-orders"]),
            Step("update-ledger", JobSpec(task=echo), after=["fetch-orders"]),
            Step("mail-link", JobSpec(task=echo), after=["render-invoices", "update-ledger"]),
        ],
        name="nightly invoices",
    )
    fan = client.enqueue_workflow(
        chord((JobSpec(task=echo, params={"chunk": i}) for i in range(500)), JobSpec(task=echo)),
        name="export 500 chunks, then merge",
    )
    failed = client.enqueue_workflow(
        [
            Step("charge", JobSpec(task=echo, params={"order": 7})),
            Step("ship", SHIP, after=["charge"]),
            Step("notify", JobSpec(task=echo), after=["ship"]),
        ],
        name="order 7",
    )
    worker = workers.start("w1", queues="examples.echo,examples.fail")
    _wait_ended([diamond.workflow_id, fan.workflow_id, failed.workflow_id], 180, worker.output)
    # One that waits (its root an hour ahead): still running, to be cancelled below.
    later = client.enqueue_workflow(
        [Step("tomorrow", JobSpec(task=echo, delay=3600)), Step("after-it", JobSpec(task=echo), after=["tomorrow"])],
        name="tomorrow's report",
    )
    from jobconsole.models import Workflow

    deadline = time.monotonic() + 60
    while not Workflow.objects.filter(id=later.workflow_id).exists() and time.monotonic() < deadline:
        time.sleep(0.2)

    tab = operator
    for scheme in ("light", "dark"):
        dark(tab, scheme == "dark")
        tab.visit("/workflows/", f"workflows-{scheme}")
        assert tab.page.locator("main h1").inner_text() == "Workflows"
        assert tab.page.locator(".sidebar .nav a[aria-current=page]").inner_text().strip() == "Workflows"
        rows = tab.page.locator("table.workflows tbody tr")
        assert rows.count() == 4
        fan_row = tab.page.locator("tr", has_text="export 500 chunks, then merge")
        assert "501 completed" in fan_row.locator(".wf-legend").inner_text()
        assert "ended with failures" in tab.page.locator("tr", has_text="order 7").inner_text()
    dark(tab, False)
    tab.visit("/workflows/?state=running", "workflows-running-only")
    assert tab.page.locator("table.workflows tbody tr").count() == 1
    assert "tomorrow's report" in tab.page.locator("table.workflows").inner_text()
    tab.visit("/workflows/?name=invoices", "workflows-by-name")
    assert tab.page.locator("table.workflows tbody tr").count() == 1

    # The diamond: four nodes in three layers; a node opens its job, whose page links back.
    for scheme in ("light", "dark"):
        dark(tab, scheme == "dark")
        tab.visit(f"/workflows/{diamond.workflow_id}/", f"diamond-{scheme}")
        assert tab.page.locator("svg.wf-graph a.wf-node").count() == 4
        assert tab.page.locator("svg.wf-graph path.wf-edge").count() == 4
        assert tab.page.locator("svg.wf-graph a.wf-node.tone-ok").count() == 4
    dark(tab, False)
    tab.click("svg.wf-graph a.wf-node:has-text('mail-link')", "diamond-click-to-job")
    mail = diamond.job_ids_by_step["mail-link"]
    assert tab.page.url == tab.url(f"/jobs/{mail}/")
    links = tab.page.locator("#workflow").inner_text()
    assert "nightly invoices" in links and "render-invoices" in links and "update-ledger" in links
    tab.page.locator("#workflow").scroll_into_view_if_needed()
    tab.screenshot("job-with-its-workflow")

    # The fan-out: 500 members and the callback, two nodes; the collapsed one lists its jobs.
    for scheme in ("light", "dark"):
        dark(tab, scheme == "dark")
        tab.visit(f"/workflows/{fan.workflow_id}/", f"fan-out-500-{scheme}")
        nodes = tab.page.locator("svg.wf-graph a.wf-node")
        assert nodes.count() == 2
        assert f"{TIMES}500" in (nodes.first.text_content() or "")
        assert "500 links" in (tab.page.locator("svg.wf-graph").text_content() or "")
        tab.shots.directory.mkdir(parents=True, exist_ok=True)  # the graph alone, to look at closely
        tab.page.locator(".wf-graph-panel").screenshot(path=str(tab.shots.directory / f"graph-fan-out-{scheme}.png"))
    dark(tab, False)
    tab.click(f"svg.wf-graph a.wf-node:has-text('{TIMES}500')", "fan-out-members")
    assert "?step=" in tab.page.url
    assert "500 listed" in tab.page.locator("#members").inner_text()
    assert tab.page.locator("#members tbody tr").count() == 50

    # The failed one: the dead member in red, its dependent cancelled; resubmit goes to the bulk preview.
    tab.visit(f"/workflows/{failed.workflow_id}/", "failed-workflow")
    assert tab.page.locator("svg.wf-graph a.wf-node.tone-bad").count() == 1
    tab.click("a:has-text('Resubmit 1 dead job')", "failed-workflow-resubmit-preview")
    assert "/bulk/new" in tab.page.url and "1" in tab.page.locator("main").inner_text()

    # The waiting one: cancelled with its button (a confirm first), audited.
    asked = accept_dialogs(tab)
    tab.visit(f"/workflows/{later.workflow_id}/", "waiting-workflow")
    assert tab.page.locator("svg.wf-graph a.wf-node.pending").count() == 2
    tab.click("button:has-text('Cancel workflow')", "waiting-workflow-cancelled")
    assert asked and asked[0].startswith("Cancel workflow tomorrow's report?")
    assert "cancelled: 2 jobs" in tab.page.locator(".messages").inner_text()
    from jobconsole.models import AuditLog

    assert AuditLog.objects.filter(action="workflow_cancel", count=2).exists()
    tab.assert_no_browser_errors()
