"""The Go scheduler seed's own black-box test (its tests/api_integration_test.go and tests/test_api.sh) against
`make run`'s stack, step for step: wait for GET /health to answer 200, POST a send_email job with a string payload
and max_retries 1 to /jobs without a token, expect 202 and a non-empty job_id. Then the stack's worker runs it."""

import json
import re
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest

from jobconsole.core import JobState
from tests.live import wait_until
from tests.processes.test_stack import STARTUP_S, Stack
from tests.processes.test_stack import start_stack as start_stack  # the fixture


def health_ok(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_go_schedulers_black_box_test_passes_against_make_run(start_stack: Callable[..., Stack]) -> None:
    stack: Stack = start_stack(WORKERS="1")
    stack.wait_for("console: http://127.0.0.1:", STARTUP_S)
    match = re.search(r"console: (http://127\.0\.0\.1:\d+)/", stack.output())
    assert match, stack.output()
    base = match.group(1)
    assert "open to callers without a token (JOBCONSOLE_API_ANONYMOUS_SEEDS=1)" in stack.output()

    deadline = time.monotonic() + STARTUP_S  # the seed waits 60 s, polling every 2 s; start-up here is slower
    while not health_ok(base):
        assert time.monotonic() < deadline, f"/health never answered 200\n{stack.output()[-4000:]}"
        time.sleep(2)

    body = {"type": "send_email", "priority": "normal", "payload": '{"to": "test@example.com", "subject": "Test"}',
            "max_retries": 1}  # fmt: skip
    request = urllib.request.Request(f"{base}/jobs", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 202
        job_id = json.loads(response.read())["job_id"]
    assert job_id

    def completed() -> bool:
        return stack.client.get(job_id).state is JobState.COMPLETED

    wait_until(completed, 60, "the send_email job to complete", stack.output)
    stack.stop(signal.SIGINT)  # Ctrl-C (test_stack.py checks that everything stops)
