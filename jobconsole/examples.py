"""Example tasks for `make run`'s demo and the tests (this repository's project/tasks.py registers them)."""

import asyncio
import random
import time
from typing import Any

from jobconsole.core import JobContext, PermanentError, task


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


# The jobs of an online shop, for `manage.py demo` (project/demo.py): three queues, and failures that group into
# distinct fingerprints (exception class + the frame that raised it) on the console's dead-letter page.


class MailboxUnavailable(Exception):
    """The receiving mail server refused the address."""


class PaymentDeclined(PermanentError):
    """The card issuer said no: permanent, so the job is dead-lettered without a retry."""


CUSTOMERS = range(1, 90_000)  # ids past it do not exist


@task(name="examples.resize_image", queue="default", max_retries=2, retry_delay=1)
def resize_image(image_id: int, width: int = 800) -> dict[str, int]:
    """A fast job (20-150 ms)."""
    time.sleep(random.uniform(0.02, 0.15))
    return {"image_id": image_id, "width": width, "height": width * 3 // 4}


@task(name="examples.send_welcome_email", queue="emails", max_retries=2, retry_delay=1, backoff_strategy="constant")
def send_welcome_email(to: str, template: str = "welcome") -> dict[str, str]:
    """A fast job; addresses at bounce.example.com fail every attempt and end as dead letters."""
    _deliver(to)
    return {"sent_to": to, "template": template}


def _deliver(to: str) -> None:
    time.sleep(random.uniform(0.03, 0.08))
    if to.endswith("@bounce.example.com"):
        raise MailboxUnavailable(f"550 5.1.1 <{to}>: recipient address rejected: mailbox unavailable")


@task(name="examples.send_digest", queue="emails", max_retries=3, retry_delay=5)
def send_digest(to: str, period: str = "daily") -> dict[str, str]:
    """The demo enqueues these minutes ahead (scheduled jobs)."""
    _deliver(to)
    return {"sent_to": to, "period": period}


@task(name="examples.send_newsletter", queue="emails", priority="low", max_retries=3, retry_delay=5)
def send_newsletter(to: str, issue: str = "") -> dict[str, str]:
    """Slow-ish (0.5-1.5 s: the mail provider throttles bulk mail); the demo sends them in bursts that keep the
    workers busy for a while, so queues back up and drain again."""
    time.sleep(random.uniform(0.5, 1.5))
    _deliver(to)
    return {"sent_to": to, "issue": issue}


@task(name="examples.charge_card", queue="default", priority="high", max_retries=2, retry_delay=1,
      backoff_strategy="constant")  # fmt: skip
def charge_card(customer_id: int, amount_cents: int, card_last4: str = "4242") -> dict[str, Any]:
    """Unknown customers fail with KeyError (retried, then dead); card 0002 is declined (dead at once)."""
    customer = _lookup_customer(customer_id)
    return {"customer": customer["name"], "authorization": _authorize(amount_cents, card_last4)}


def _lookup_customer(customer_id: int) -> dict[str, str]:
    customers = {customer_id: {"name": f"customer {customer_id}"}} if customer_id in CUSTOMERS else {}
    return customers[customer_id]


def _authorize(amount_cents: int, card_last4: str) -> str:
    time.sleep(random.uniform(0.05, 0.2))
    if card_last4 == "0002":
        raise PaymentDeclined(f"card ending {card_last4} declined: insufficient funds ({amount_cents / 100:.2f})")
    return f"auth-{random.randrange(16**8):08x}"


@task(name="examples.sync_inventory", queue="default", max_retries=5, retry_delay=0.5)
def sync_inventory(context: JobContext, sku: str, flaky_attempts: int = 1) -> dict[str, Any]:
    """Flaky: the supplier's API refuses the first `flaky_attempts` attempts, then the job succeeds."""
    stock = _fetch_stock(sku, context.attempt, flaky_attempts)
    return {"sku": sku, "stock": stock, "attempt": context.attempt}


def _fetch_stock(sku: str, attempt: int, flaky_attempts: int) -> int:
    time.sleep(random.uniform(0.02, 0.1))
    if attempt <= flaky_attempts:
        raise ConnectionError(f"supplier API for {sku}: connection reset by peer (attempt {attempt})")
    return random.randrange(500)


@task(name="examples.import_csv", queue="reports", max_retries=1, retry_delay=1)
def import_csv(context: JobContext, rows: list[str]) -> dict[str, int]:
    """Parses `rows` ("sku,quantity"), checkpointing the rows done; a bad quantity fails with ValueError."""
    done = int((context.checkpoint or {}).get("rows_done", 0))
    total = 0
    for number, row in enumerate(rows[done:], start=done + 1):
        total += _parse_row(row)
        context.heartbeat(progress=number / len(rows), checkpoint={"rows_done": number})
    return {"rows": len(rows), "quantity": total}


def _parse_row(row: str) -> int:
    time.sleep(0.01)
    _sku, quantity = row.split(",", 1)
    return int(quantity)


@task(name="examples.build_report", queue="reports", priority="low", visibility_timeout=15,
      max_heartbeat_interval=10, max_retries=2, retry_delay=5, on_shutdown="requeue")  # fmt: skip
def build_report(
    context: JobContext, report: str, sections: int = 10, seconds_per_section: float = 1.0
) -> dict[str, Any]:
    """A slow job: one heartbeat per section with its progress and a checkpoint, from which a retry resumes."""
    done = int((context.checkpoint or {}).get("sections_done", 0))
    resumed_from = done
    while done < sections:
        time.sleep(seconds_per_section)
        done += 1
        context.heartbeat(progress=done / sections, checkpoint={"sections_done": done})
    return {"report": report, "sections": sections, "resumed_from": resumed_from}


@task(name="examples.rebuild_search_index", queue="reports", max_retries=1, visibility_timeout=15)
def rebuild_search_index(context: JobContext, shard: int, seconds: float = 3.0) -> dict[str, Any]:
    """Enqueued with a unique key per shard: while one waits or runs, the same shard is not enqueued twice."""
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        time.sleep(min(0.5, seconds - elapsed))
        context.heartbeat(progress=min(1.0, (time.monotonic() - started) / seconds))
    return {"shard": shard, "documents": random.randrange(10_000, 50_000)}
