"""A bulk resubmit in the browser: from the dead-letters page's filter to the preview, the confirmation, a live
progress bar that moves while a real worker's system worker runs the operation, and the resubmitted jobs
completing; a viewer is refused."""

import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jobconsole.core import JobSpec
from jobconsole.models import BulkOperation, DeadLetter
from tests.browser.support import ConsoleUsers, LiveConsole, Visitor, Workers
from tests.bulk_helpers import RUNWORKER_EXITING
from tests.conftest import PROJECT, PYTHON, manage_env
from tests.live import wait_until

JOBS = 400


def test_a_bulk_resubmit_by_filter_runs_with_a_moving_progress_bar_and_the_jobs_complete(
    visitor: Callable[..., Visitor], console_server: LiveConsole, console_users: ConsoleUsers, workers: Workers,
    settings: Any, tmp_path: Path,
) -> None:  # fmt: skip
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "BULK": {"CHUNK": 20}}  # 20 chunks: a bar that moves
    client = console_server.client
    # examples.flaky fails its first attempt: with no retries it dies once, and a resubmit (attempt 2) succeeds.
    client.enqueue_many([JobSpec(task="examples.flaky", params={"failures": 1}, max_retries=0) for _ in range(JOBS)])
    others = [client.enqueue("examples.fail", {"message": "not this one"}, max_retries=0).id for _ in range(3)]
    seeder = workers.start("seed", "examples.flaky,examples.fail", "--no-system-worker")
    wait_until(lambda: DeadLetter.objects.count() == JOBS + 3, 60, "the dead letters to be mirrored", seeder.output)
    seeder.terminate()

    tab = visitor(console_users.operator)
    tab.visit("/dead/?task=examples.flaky", "dead-letters-filtered")
    tab.click("a.btn:has-text('Resubmit all matching')", "bulk-preview")
    assert tab.page.url.startswith(tab.url("/bulk/new?kind=resubmit")) and "task=examples.flaky" in tab.page.url
    assert tab.page.inner_text(".tile .value").strip() == f"{JOBS:,}"
    tab.page.fill("input[name=reason]", "fixed the flaky dependency")
    tab.page.once("dialog", lambda dialog: dialog.accept())  # the form asks first
    tab.click("form[action='/bulk/confirm'] button[type=submit]", "bulk-waiting")
    operation = BulkOperation.objects.get()
    assert tab.page.url == tab.url(f"/bulk/{operation.pk}/") and operation.total == JOBS
    assert "waiting for a worker" in tab.page.inner_text("#bulk-progress")

    # A worker whose system worker pauses after each chunk's Redis step, so the bar has time to move.
    log = (tmp_path / "slow-worker.log").open("wb")
    env = manage_env(console_server.redis_url, tmp_path, DATABASE_URL=console_server.database_url)
    slow = subprocess.Popen(
        [PYTHON, *RUNWORKER_EXITING, "-1", "0.3", "--queues", "examples.flaky", "--name", "slow"],
        cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        seen: list[int] = []
        deadline = time.monotonic() + 90
        while "done" not in tab.page.inner_text("#bulk-progress h2"):
            value = int(tab.page.get_attribute("#bulk-progress progress", "value") or 0)
            if not seen or value != seen[-1]:
                seen.append(value)
                if 0 < value < JOBS and len(seen) == 3:
                    tab.screenshot("bulk-running")
            assert time.monotonic() < deadline, f"no end; progress seen {seen}"
            time.sleep(0.2)
        tab.screenshot("bulk-done")
        assert len([v for v in seen if 0 < v < JOBS]) >= 2, f"the bar did not move: {seen}"  # polled, not reloaded
        summary = tab.page.inner_text("#bulk-progress")
        assert re.search(rf"Resubmitted {JOBS:,} of {JOBS:,}", summary), summary
        done = lambda: client.counts("examples.flaky").completed == JOBS  # noqa: E731
        wait_until(done, 60, "the jobs to complete", lambda: (tmp_path / "slow-worker.log").read_text())
    finally:
        slow.kill()
        slow.wait(timeout=10)
        log.close()
    assert set(DeadLetter.objects.filter(task="examples.flaky").values_list("resubmitted_by", flat=True)) == {
        "operator"
    }  # fmt: skip
    assert all(client.get(job_id).state.value == "dead" for job_id in others)  # outside the filter
    tab.visit("/bulk/", "bulk-operations")
    assert "Resubmit dead letters" in tab.page.inner_text("#bulk-operations")
    tab.assert_no_browser_errors()

    viewer = visitor(console_users.viewer)
    refused = viewer.visit("/bulk/new?kind=resubmit&task=examples.flaky", "bulk-preview-refused")
    assert refused is not None and refused.status == 403
    viewer.visit(f"/bulk/{operation.pk}/", "bulk-detail-viewer")
    assert viewer.page.locator("button:has-text('Cancel')").count() == 0
