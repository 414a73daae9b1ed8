"""The console's database reads that bench/console_pages.py found slow at 100,000 dead letters, kept correct:
groups by cause counted by fingerprint alone, the page's bounded text search, the skip scan behind the filters'
drop-downs, and the cursor walk over the indexes that order dead letters."""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client as WebClient
from django.utils import timezone

from dashboards.distinct import distinct_values
from jobconsole.mirror.rows import fingerprint
from jobconsole.models import AuditLog, DeadLetter, Job

pytestmark = [pytest.mark.db, pytest.mark.django_db]

NOW = timezone.now()


def dead(
    n: int,
    *,
    minutes_ago: float,
    queue: str = "mail",
    message: str = "boom",
    frame: str = "app.py:10 in send",
    error_class: str = "SMTPError",
    resubmitted: bool = False,
) -> DeadLetter:
    died = NOW - timedelta(minutes=minutes_ago)
    job = Job.objects.create(
        id=f"01JSCALE{n:018d}", task="mail.send", queue=queue, state="dead", enqueued_at=died, finished_at=died
    )
    return DeadLetter.objects.create(
        job=job,
        queue=queue,
        task=job.task,
        died_at=died,
        attempts=1,
        error_class=error_class,
        message=message,
        top_frame=frame,
        fingerprint=fingerprint(error_class, frame),
        resubmitted_at=NOW if resubmitted else None,
        resubmitted_by="op" if resubmitted else "",
    )


@pytest.fixture
def browser() -> WebClient:
    web = WebClient()
    web.force_login(User.objects.create_superuser("scale"))
    return web


def test_a_cause_stays_one_group_when_its_line_number_changes(browser: WebClient) -> None:
    dead(1, minutes_ago=30, frame="app.py:10 in send")
    dead(2, minutes_ago=20, frame="app.py:10 in send")
    dead(3, minutes_ago=10, frame="app.py:14 in send")  # an edit above the raising line moved it
    dead(4, minutes_ago=5, error_class="TimeoutError", frame="app.py:30 in connect")
    dead(5, minutes_ago=1, resubmitted=True)  # not open: not counted by default
    groups = browser.get("/dead/").context["groups"]
    assert [(g["error_class"], g["count"]) for g in groups] == [("SMTPError", 3), ("TimeoutError", 1)]
    smtp = groups[0]
    assert smtp["top_frame"] == "app.py:14 in send"  # named after its latest death
    assert (smtp["first"], smtp["last"]) == (NOW - timedelta(minutes=30), NOW - timedelta(minutes=10))
    everything = browser.get("/dead/", {"status": "all"}).context["groups"]
    assert [(g["error_class"], g["count"]) for g in everything] == [("SMTPError", 4), ("TimeoutError", 1)]


def test_the_pages_text_search_looks_in_the_newest_window_and_says_so(
    browser: WebClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("dashboards.views.dead_letters.TEXT_WINDOW", 3)
    dead(1, minutes_ago=50, message="needle in an old one")
    for n in range(2, 6):
        dead(n, minutes_ago=50 - n, message=f"hay {n}")
    page = browser.get("/dead/", {"q": "needle"})
    assert page.context["letters"] == [] and page.context["groups"] == []
    assert "newest 3 dead letters" in page.content.decode()
    export = b"".join(browser.get("/dead/export.csv", {"q": "needle"}).streaming_content).decode()
    assert "needle in an old one" in export  # an export searches them all
    recent = browser.get("/dead/", {"q": "hay 5"})
    assert [d.message for d in recent.context["letters"]] == ["hay 5"]
    until = (NOW - timedelta(minutes=47.5)).strftime("%Y-%m-%dT%H:%M")  # leaves the needle and one more
    narrowed = browser.get("/dead/", {"q": "needle", "until": until})
    assert [d.message for d in narrowed.context["letters"]] == ["needle in an old one"]  # within the window now
    assert "newest 3" not in narrowed.content.decode()


def test_the_cursor_walks_every_open_dead_letter_once_newest_first(browser: WebClient) -> None:
    expected = []
    for n in range(120):
        letter = dead(n, minutes_ago=n // 3, resubmitted=n % 10 == 0)  # ties of three at each minute
        if n % 10:
            expected.append(letter.pk)
    seen: list[int] = []
    cursor = ""
    while True:
        page = browser.get("/dead/", {"cursor": cursor} if cursor else {})
        seen += [d.pk for d in page.context["letters"]]
        cursor = page.context["next_cursor"]
        if not cursor:
            break
    ordered = sorted(DeadLetter.objects.filter(pk__in=expected), key=lambda d: (d.died_at, d.pk), reverse=True)
    assert seen == [d.pk for d in ordered] and len(seen) == 108


def test_distinct_values_by_skip_scan(browser: Any) -> None:
    assert distinct_values(DeadLetter, "queue") == []
    for n, queue in enumerate(["mail", "billing", "mail", "audit", "billing"]):
        dead(n, minutes_ago=n, queue=queue)
    assert distinct_values(DeadLetter, "queue") == ["audit", "billing", "mail"]
    AuditLog.objects.create(actor="op", action="purge")
    AuditLog.objects.create(actor="op", action="pause")
    AuditLog.objects.create(actor="op", action="purge")
    assert distinct_values(AuditLog, "action") == ["pause", "purge"]
    page = browser.get("/dead/")
    assert page.context["queues"] == ["audit", "billing", "mail"] and page.context["tasks"] == ["mail.send"]
