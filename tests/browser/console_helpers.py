"""What the console's browser tests share: a realistic load of the example shop's jobs, waiting for jobs and the
mirror, a snapshot of Redis to prove a refused request changed nothing, and small page helpers (the sidebar,
confirm dialogs, the colour scheme)."""

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import redis

from jobconsole.core import Client, JobSpec, JobState
from tests.browser.support import Proc, Visitor
from tests.live import wait_until


def _job(task: str, params: dict[str, Any], **options: Any) -> JobSpec:
    return JobSpec(task=task, params=params, **options)


# A minute of the example shop (jobconsole/examples.py), with failures that die at once (max_retries=0) so the
# dead-letter page fills in seconds: four fingerprints, a flaky job that succeeds on its second attempt, slow
# reports that heartbeat their progress, and digests scheduled an hour ahead.
SHOP = [
    *[_job("examples.resize_image", {"image_id": 1000 + n, "width": 800}) for n in range(6)],
    *[_job("examples.send_welcome_email", {"to": f"ana{n}@example.com"}) for n in range(4)],
    *[_job("examples.send_welcome_email", {"to": f"bo{n}@bounce.example.com"}, max_retries=0) for n in range(3)],
    *[_job("examples.charge_card", {"customer_id": 120 + n, "amount_cents": 1999}) for n in range(3)],
    UNKNOWN_CUSTOMER := _job("examples.charge_card", {"customer_id": 95_001, "amount_cents": 4500}, max_retries=0),
    _job("examples.charge_card", {"customer_id": 77, "amount_cents": 12_900, "card_last4": "0002"}),
    _job("examples.import_csv", {"rows": ["SKU-00001,4", "SKU-00002,n/a"]}, max_retries=0),
    _job("examples.sync_inventory", {"sku": "SKU-00042", "flaky_attempts": 1}),
    *[_job("examples.send_digest", {"to": f"chen{n}@example.org"}, delay=3600 + 600 * n) for n in range(3)],
]
SHOP_QUEUES = ("default", "emails", "reports")
SHOP_DEAD = 6  # the bounces, the unknown customer, the declined card, the bad CSV row
SLOW_REPORT = _job("examples.build_report", {"report": "sales", "sections": 120, "seconds_per_section": 0.5})


@dataclass(frozen=True)
class Shop:
    ids: list[str]  # every job's
    report: str  # the slow report's
    unknown_customer: str  # a KeyError, dead with its traceback


def enqueue_shop(client: Client) -> Shop:
    """The shop's minute of jobs plus one slow report that keeps running (with progress) for a minute."""
    ids = [result.id for result in client.enqueue_many([*SHOP, SLOW_REPORT])]
    return Shop(ids, report=ids[-1], unknown_customer=ids[SHOP.index(UNKNOWN_CUSTOMER)])


def wait_for_state(
    client: Client, job_id: str, states: JobState | Iterable[JobState], timeout: float, log: Callable[[], str] = str
) -> None:
    wanted = {states} if isinstance(states, JobState) else set(states)
    names = "/".join(sorted(s.value for s in wanted))
    wait_until(lambda: client.get(job_id, history=False).state in wanted, timeout, f"job {job_id} {names}", log)


def wait_for_dead_letters(count: int, timeout: float, worker: Proc) -> None:
    """Until the mirror (in the worker) wrote `count` dead letters to the database."""
    from jobconsole.models import DeadLetter

    wait_until(lambda: DeadLetter.objects.count() >= count, timeout, f"{count} dead letters mirrored", worker.output)


def wait_for_mirrored(job_id: str, state: JobState, timeout: float, worker: Proc) -> None:
    from jobconsole.models import Job

    wait_until(
        lambda: Job.objects.filter(id=job_id, state=state.value).exists(), timeout,
        f"job {job_id} mirrored as {state.value}", worker.output,
    )  # fmt: skip


def redis_snapshot(r: "redis.Redis") -> dict[str, str]:
    """Every key and a digest of its value: equal snapshots mean nothing in Redis changed."""
    out = {}
    for key in r.scan_iter(count=1000):
        dumped = r.dump(key)
        out[key if isinstance(key, str) else key.decode()] = hashlib.sha256(dumped or b"").hexdigest()
    return out


def sidebar(tab: Visitor) -> list[tuple[str, str]]:
    """The console pages of the sidebar as (label, path), the admin's link left out."""
    links = tab.page.eval_on_selector_all(
        ".sidebar .nav a", "links => links.map(a => [a.textContent.trim(), a.getAttribute('href')])"
    )
    return [(label, href) for label, href in links if not href.startswith("/admin/")]


def accept_dialogs(tab: Visitor) -> list[str]:
    """Answer every confirm() of the tab with OK (Playwright dismisses them otherwise); returns their texts."""
    asked: list[str] = []

    def accept(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    tab.page.on("dialog", accept)
    return asked


def dark(tab: Visitor, on: bool = True) -> None:
    tab.page.emulate_media(color_scheme="dark" if on else "light")


def background_luminance(tab: Visitor, selector: str = "body") -> float:
    """The relative luminance (0 black .. 1 white) of an element's background colour."""
    rgb = tab.page.eval_on_selector(
        selector, "el => getComputedStyle(el).backgroundColor.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number)"
    )
    r, g, b = (c / 255 for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def buttons(tab: Visitor) -> list[str]:
    """The text of every button and button-styled link on the page (what a user could press)."""
    texts = tab.page.eval_on_selector_all(
        "main button, main a.btn, main input[type=submit]", "els => els.map(e => (e.textContent || e.value).trim())"
    )
    return [" ".join(t.split()) for t in texts]
