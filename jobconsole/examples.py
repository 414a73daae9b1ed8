"""Example tasks for `make run`'s demo and the tests (this repository's project/tasks.py registers them)."""

import asyncio
import time
from typing import Any

from jobconsole.core import JobContext, task


@task(name="examples.echo", max_retries=0)
def echo(**params: Any) -> dict[str, Any]:
    """Returns its parameters."""
    return params


@task(name="examples.sleep", visibility_timeout=10, max_retries=1, on_shutdown="requeue")
def sleep(context: JobContext, seconds: float = 1.0) -> dict[str, float]:
    """Sleeps `seconds`, heartbeating every second with its progress."""
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        time.sleep(min(1.0, seconds - elapsed))
        context.heartbeat(progress=min(1.0, (time.monotonic() - started) / seconds) if seconds else 1.0)
    return {"slept": round(time.monotonic() - started, 3)}


@task(name="examples.async_sleep", visibility_timeout=10, max_retries=1)
async def async_sleep(seconds: float = 1.0) -> dict[str, float]:
    """The async version of examples.sleep (runs on the worker's event loop)."""
    await asyncio.sleep(seconds)
    return {"slept": seconds}


class ExampleFailure(Exception):
    pass


@task(name="examples.fail", max_retries=2, retry_delay=0.5, backoff_strategy="constant")
def fail(message: str = "examples.fail always fails") -> None:
    """Always raises (retried, then dead-lettered)."""
    raise ExampleFailure(message)


@task(name="examples.flaky", max_retries=5, retry_delay=0.2, backoff_strategy="exponential")
def flaky(context: JobContext, failures: int = 1) -> dict[str, int]:
    """Fails its first `failures` attempts, then succeeds."""
    if context.attempt <= failures:
        raise ExampleFailure(f"attempt {context.attempt} of {failures} planned failures")
    return {"succeeded_on_attempt": context.attempt}


# The job types of the Go scheduler seed, simulated.


@task(name="send_email", max_retries=3, retry_delay=5, backoff_strategy="exponential_jitter")
def send_email(to: str = "", subject: str = "", body: str = "", payload: Any = None) -> dict[str, Any]:
    """Pretends to send an email (50 ms); `payload` takes the seed API's free-form string."""
    time.sleep(0.05)
    return {"sent_to": to or "unknown", "subject": subject, "bytes": len(body) + len(str(payload or ""))}


@task(name="export_data", max_retries=3, retry_delay=10, visibility_timeout=30)
def export_data(context: JobContext, rows: int = 1000, format: str = "csv", payload: Any = None) -> dict[str, Any]:
    """Pretends to export `rows` rows, heartbeating progress and a resumable checkpoint every 10%."""
    resumed_from = done = int((context.checkpoint or {}).get("rows_done", 0))
    step = max(1, rows // 10)
    while done < rows:
        time.sleep(0.02)
        done = min(rows, done + step)
        context.heartbeat(progress=done / rows, checkpoint={"rows_done": done})
    return {"rows": rows, "format": format, "resumed_from": resumed_from}
