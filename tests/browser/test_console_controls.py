"""Controls in a real browser (issue 30): a running `runworker` quieted from the Workers page takes no new job
while its running one finishes, and stopped from there it exits as SIGTERM makes it; a queue's limit edited on
the Flow control page holds in Redis, beside the settings' value."""

import time

import pytest

from jobconsole.core import JobState
from jobconsole.core.groups import Group
from jobconsole.models import AuditLog
from tests.browser.console_helpers import accept_dialogs, wait_for_state
from tests.browser.support import LiveConsole, Visitor, Workers

# A browser and a worker process on a 2-core machine shared with other work.
pytestmark = pytest.mark.timeout(300)

QUEUE = "examples.sleep"


def _row(tab: Visitor, worker_id: str) -> str:
    return str(tab.page.locator("#workers-live tbody tr", has=tab.page.locator(f"span.mono:text-is('{worker_id}')"))
               .inner_text())  # fmt: skip


def _until(tab: Visitor, worker_id: str, text: str, timeout: float = 15) -> None:
    """Reload the Workers page until the worker's row shows `text` (a worker renews its entry every 2 s)."""
    deadline = time.monotonic() + timeout
    while text not in _row(tab, worker_id):
        assert time.monotonic() < deadline, _row(tab, worker_id)
        time.sleep(0.5)
        tab.visit("/workers/")


def test_quiet_and_stop_a_worker_and_edit_a_limit_from_the_console(
    operator: Visitor, console_server: LiveConsole, workers: Workers
) -> None:
    client = console_server.client
    worker = workers.start("w1", QUEUE)
    running = client.enqueue(QUEUE, {"seconds": 4}).id
    wait_for_state(client, running, JobState.RUNNING, 30, worker.output)

    asked = accept_dialogs(operator)
    operator.visit("/workers/", "workers-running")
    _until(operator, "w1", "1 / 10")  # busy of its concurrency
    assert "● running" in _row(operator, "w1")
    operator.click("#workers-live tr:has(span.mono:text-is('w1')) button:has-text('Quiet')", "workers-quiet-asked")
    assert asked == ["Quiet w1? It takes no new jobs and finishes the 1 it runs."]
    assert "takes no new jobs" in operator.page.locator(".messages").inner_text()
    _until(operator, "w1", "◑ quiet")
    waiting = client.enqueue(QUEUE, {"seconds": 0}).id
    wait_for_state(client, running, JobState.COMPLETED, 30, worker.output)  # the running job finished
    time.sleep(2)
    assert client.get(waiting, history=False).state is JobState.QUEUED  # and nothing new was taken
    operator.visit("/workers/", "workers-quiet")

    operator.click("#workers-live tr:has(span.mono:text-is('w1')) button:has-text('Stop')", "workers-stop-asked")
    assert asked[-1].startswith("Stop w1? It takes no new jobs and exits once its")
    assert worker.popen.wait(timeout=30) == 0  # a graceful exit, as after SIGTERM
    assert "stop requested by an operator" in worker.output()
    assert client.get(waiting, history=False).state is JobState.QUEUED
    actions = AuditLog.objects.filter(action__startswith="worker_").order_by("at").values_list("action", flat=True)
    assert list(actions) == ["worker_quiet", "worker_stop"]

    client.define_group(Group("payments", connections=2, requests=10, period_ms=1000))
    operator.visit("/flow/", "flow-before")
    group_form = operator.page.locator("#flow-edit form[aria-label='Limits of group payments']")
    group_form.locator("input[name=connections]").fill("4")
    group_form.locator("input[name=requests]").fill("30")
    group_form.locator("select[name=unit]").select_option("minute")
    operator.flush()
    group_form.locator("button").click()
    operator.page.wait_for_load_state("networkidle")
    assert "Group payments: at most 4 at once, 30 a minute." in operator.page.locator(".messages").inner_text()
    [group] = client.queries.queues.flow_control().groups
    assert (group.connections, group.requests, group.period_ms) == (4, 30, 60_000)
    new_limit = operator.page.locator("#flow-edit form[aria-label='A new queue limit']")
    new_limit.locator("select[name=queue]").select_option(QUEUE)
    new_limit.locator("input[name=limit]").fill("3")
    operator.click("#flow-edit button:has-text('Set queue limit')", "flow-limit-set")
    assert f"Queue {QUEUE}: at most 3 running at once." in operator.page.locator(".messages").inner_text()
    assert client.queries.queues.flow_control().queue_limits == {QUEUE: 3}
    row = operator.page.locator("#flow-live tr", has=operator.page.locator(f"a:text-is('{QUEUE}')")).inner_text()
    assert "0 of 3" in row and "edited" in row
    assert AuditLog.objects.filter(action="set_queue_limit", queue=QUEUE).exists()
    operator.click(
        "#flow-edit form[aria-label='Limit of queue examples.sleep'] button:has-text('Lift limit')", "flow-lifted"
    )
    assert client.queries.queues.flow_control().queue_limits == {}
    operator.assert_no_browser_errors()


def test_an_alarm_silenced_in_the_console_stops_shouting_and_comes_back_when_lifted(
    operator: Visitor, console_server: LiveConsole
) -> None:
    client = console_server.client
    client.enqueue(QUEUE, {"seconds": 0})  # waits with no worker: the service's workers finding is degraded
    operator.visit("/", "overview-degraded")
    assert operator.page.locator("#service-health").count() == 1
    operator.visit("/alarms/", "alarms-before")
    form = operator.page.locator(f"form[aria-label='Silence service:workers:{QUEUE}']")
    form.locator("select[name=duration]").select_option("1h")
    form.locator("input[name=reason]").fill("no workers on purpose: maintenance window")
    operator.flush()
    form.locator("button").click()
    operator.page.wait_for_load_state("networkidle")
    operator.screenshot("alarms-silenced")
    assert "Alarm silenced for 1 hour" in operator.page.locator(".messages").inner_text()
    row = operator.page.locator("tr.is-silenced").inner_text()
    assert "silenced" in row and "operator" in row and "maintenance window" in row
    operator.visit("/", "overview-silenced")
    assert operator.page.locator("#service-health").count() == 0  # the banner no longer shouts
    assert "maintenance window" in operator.page.locator(".reasons.silenced").inner_text()
    asked = accept_dialogs(operator)
    operator.visit("/alarms/")
    operator.click("button:has-text('Lift silence')", "alarms-lifted")
    assert asked == ["Lift this silence? The alarm counts again at once."]
    operator.visit("/", "overview-back")
    assert operator.page.locator("#service-health").count() == 1
    assert AuditLog.objects.filter(action__in=["silence_alarm", "lift_silence"]).count() == 2
    operator.assert_no_browser_errors()
