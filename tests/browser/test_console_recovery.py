"""A worker killed in the middle of a job (kill -9, as a crash): the console shows the job stalled with its
evidence, an operator requeues it, another worker completes it, and its page shows the lost attempt."""

import time
from pathlib import Path

import pytest
import redis

from jobconsole.core import JobState
from tests.browser.console_helpers import buttons, redis_snapshot, wait_for_state
from tests.browser.support import LiveConsole, Visitor, Workers
from tests.live import wait_until

# Pages, workers and a browser on a 2-core machine shared with other work: each test takes 10-60 s when it
# is quiet, three or four times that under load.
pytestmark = pytest.mark.timeout(300)


def test_a_job_whose_worker_is_killed_shows_stalled_then_recovered(
    operator: Visitor, viewer: Visitor, console_server: LiveConsole, workers: Workers, tmp_path: Path, r: redis.Redis
) -> None:
    client = console_server.client
    ledger = tmp_path / "ledger"
    # tests.record heartbeats every 0.2 s under a 2 s lease (so a crash shows within seconds).
    params = {"ledger": str(ledger), "seconds": 120.0, "retry_seconds": 1.0}  # killed long before it ends
    job_id = client.enqueue("tests.record", params).id
    first = workers.start("w1")
    wait_until(lambda: ledger.exists() and "start" in ledger.read_text(), 30, "the job to start", first.output)
    wait_for_state(client, job_id, JobState.RUNNING, 10, first.output)

    operator.visit("/running/", "running-healthy")
    row = operator.page.locator(f"#running tr:has(a[href='/jobs/{job_id}/'])")
    assert "healthy" in row.inner_text()
    assert "Requeue now" not in row.inner_text(), "no requeue while the lease is valid"

    first.kill()  # SIGKILL: no goodbye, the lease stops being renewed
    [deadline] = client.queries.jobs.lease_deadlines([("tests.record", job_id)])
    assert deadline is not None
    wait_until(lambda: client.queries.now() > deadline, 10, "the lease to run out")
    time.sleep(1.1)  # so the page says "ran out 1 s ago" (not 0 s), for whoever reads the screenshot

    operator.visit("/running/", "running-stalled")
    row = operator.page.locator(f"#running tr:has(a[href='/jobs/{job_id}/'])")
    text = row.inner_text()
    assert "▲ stalled" in text, text
    assert "lease ran out" in text and "last heartbeat" in text, text  # the evidence
    assert "w1" in text
    assert "is-stalled" in (row.get_attribute("class") or "")
    assert operator.page.locator(".tile.bad .label", has_text="Stalled").count() == 1
    assert client.get(job_id, history=False).state is JobState.RUNNING  # the page only looked

    # A viewer sees the same evidence and no button, and is refused when posting anyway.
    viewer.visit("/running/", "running-stalled-viewer")
    assert "▲ stalled" in viewer.page.locator(f"#running tr:has(a[href='/jobs/{job_id}/'])").inner_text()
    assert not {"↻ Requeue now", "■ Cancel"} & set(buttons(viewer))
    before = redis_snapshot(r)
    for action in ("recover", "cancel"):
        response = viewer.post(f"/jobs/{job_id}/{action}", {"next": "/running/"})
        assert response.status == 403, f"{action}: {response.status}"
    assert redis_snapshot(r) == before
    viewer.assert_no_browser_errors()

    operator.click(f"#running tr:has(a[href='/jobs/{job_id}/']) button:has-text('Requeue now')", "running-requeued")
    assert operator.page.url == operator.url("/running/")
    assert "queued again" in operator.page.locator(".messages").inner_text()
    assert client.get(job_id, history=False).state is JobState.QUEUED
    assert operator.page.locator(f"#running a[href='/jobs/{job_id}/']").count() == 0

    second = workers.start("w2")
    wait_for_state(client, job_id, JobState.COMPLETED, 30, second.output)
    starts = [line.split() for line in ledger.read_text().splitlines() if line.startswith("start")]
    assert [(s[1], s[2]) for s in starts] == [(job_id, "1"), (job_id, "2")]

    operator.visit(f"/jobs/{job_id}/", "job-recovered")
    attempts = operator.page.locator("#attempts tbody tr").all_inner_texts()
    assert len(attempts) == 2, attempts
    assert "worker_lost" in attempts[0] and "w1" in attempts[0], attempts[0]
    assert "completed" in attempts[1] and "w2" in attempts[1], attempts[1]
    timeline = operator.page.locator(".timeline").inner_text()
    assert "recover" in timeline.lower(), timeline  # the operator's action, from the audit log
    operator.assert_no_browser_errors()
