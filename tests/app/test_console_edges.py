"""Issue 30's rough edges of the console: task options and the audit log's selections in an operator's words, the
audit log's queue filter offering the known queues, the dead letters' total, paging both ways and what became of
a resubmitted one, and a queue's own charts and the counts on its state tabs."""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client as WebClient
from django.utils import timezone

from dashboards.dead_letters import GROUPS, reruns
from dashboards.task_options import describe
from dashboards.views.audit import selection_phrases
from jobconsole import actions
from jobconsole.bulk.selection import parse_selection
from jobconsole.core import task
from jobconsole.core.tasks import Task
from jobconsole.models import AuditLog, DeadLetter, Job
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

NOW = timezone.now()
TO = "\N{EN DASH}"  # between the first and last place on the pager: "1 to 50 of 1,234"
BROKEN = {"edges.flaky": True}  # the flaky task fails while this says so (an operator's fix "deployed" by a test)


@task(name="edges.flaky", queue="edges", max_retries=0)
def flaky() -> None:
    if BROKEN["edges.flaky"]:
        raise ConnectionError("upstream down")


@pytest.fixture
def browser() -> WebClient:
    web = WebClient()
    web.force_login(User.objects.create_superuser(f"op{User.objects.count()}"))
    return web


def _noop() -> None: ...


def words(**options: Any) -> dict[str, str]:
    return {o.label: o.text for o in describe(Task(func=_noop, name="edges.noop", **options).options())}


def test_task_options_read_as_words_never_as_python() -> None:
    default = words()
    assert default["Time limit"] == "no limit" and default["Heartbeat"] == "not required"
    assert default["Retries"] == "up to 3 retries (4 attempts)" and default["Retried on"] == "Exception"
    assert default["Retry delay"] == "5.0 s, 10 s, 20 s"  # the engine's own delays for three retries, all of them
    assert default["Lease"] == "30 s, renewed by heartbeats" and default["Concurrency group"] == "none"
    assert default["After the last attempt"] == "kept as a dead letter" and "Name" not in default
    tuned = words(max_retries=8, retry_delay=60, max_retry_delay=300, timeout=90, max_heartbeat_interval=5,
                  retry_on=(KeyError, TimeoutError), dead_letter_policy="discard", group="payments")  # fmt: skip
    assert tuned["Retry delay"] == "1 min, 2 min, 4 min, … at most 5 min"
    assert tuned["Time limit"] == "1 min 30 s" and tuned["Heartbeat"] == "at least every 5.0 s"
    assert tuned["Retried on"] == "KeyError, TimeoutError" and tuned["Concurrency group"] == "payments"
    assert words(max_retries=0)["Retries"] == "none (1 attempt)" and words(max_retries=1)["Retries"].startswith(
        "up to 1 retry "
    )
    assert words(backoff_strategy="constant")["Retry delay"] == "5.0 s each time"
    # An option a newer worker announces is still listed, without Python's spelling.
    later = {o.label: o.text for o in describe({"name": "x", "new_thing": None, "flags": ["a", "b"], "on": True})}
    assert later == {"New thing": "—", "Flags": "a, b", "On": "yes"}


def test_the_task_page_shows_its_options_in_words(client: Any, r: Any, browser: WebClient) -> None:
    client.enqueue("examples.echo", {"x": 1})
    run_worker(r, ["examples.echo"])  # the worker announces its tasks' options
    page = browser.get("/tasks/examples.echo/")
    options = page.content.decode().split("<h2>Options</h2>")[1].split("</section>")[0]
    assert "Time limit</dt><dd>no limit" in options and "Retried on</dt><dd>Exception" in options
    assert 'href="/queues/examples.echo/"' in options  # the queue it uses, linked
    for python in ("None", "['", "True", "False"):
        assert python not in options, python


def test_the_audit_log_shows_selections_as_phrases_and_offers_the_known_queues(client: Any, browser: WebClient) -> None:
    client.enqueue("examples.echo", {"x": 1})
    bulk = {
        "target": "deadletter",
        "filter": {"queue": ["mail", "billing"], "status": ["all"], "since": ["2026-11-25"]},
    }
    AuditLog.objects.create(actor="ana", action="bulk_resubmit", filter=bulk, count=12)
    AuditLog.objects.create(actor="ana", action="pause", queue="mail", filter={"queues": ["mail"]}, count=1)
    AuditLog.objects.create(actor="ana", action="bulk_purge", filter={"target": "job", "ids": ["a", "b"]}, count=2)
    phrases = [(p.name, p.text) for p in selection_phrases(bulk)]
    assert phrases == [
        ("", "dead letters"),
        ("queue", "mail or billing"),
        ("status", "any"),
        ("died from", "2026-11-25"),
    ]
    assert [(p.name, p.text) for p in selection_phrases({"target": "deadletter", "filter": {}})] == [
        ("", "dead letters"), ("", "all not resubmitted"),
    ]  # fmt: skip
    page = browser.get("/audit/")
    html = page.content.decode()
    assert '<span class="chip"><span class="chip-name">queue</span> mail or billing</span>' in html
    assert '<span class="chip">2 chosen by id</span>' in html
    for python in ("{'", "['", "queues="):
        assert python not in html, python
    assert '<select name="queue"><option value="">any</option><option>examples.echo</option>' in html
    # A record may name a queue Redis no longer knows: filtering on it still works and shows it chosen.
    old = browser.get("/audit/", {"queue": "mail"})
    assert [r.action for r in old.context["records"]] == ["pause"] and "<option selected>mail</option>" in (
        old.content.decode()
    )


def dead_letter(
    n: int, minutes_ago: float, *, state: str = "dead", resubmitted_minutes_ago: float | None = None
) -> DeadLetter:
    died = NOW - timedelta(minutes=minutes_ago)
    job, _ = Job.objects.update_or_create(
        id=f"01JEDGE{n:019d}", defaults={"task": "mail.send", "queue": "mail", "state": state, "enqueued_at": died}
    )
    resubmitted = None if resubmitted_minutes_ago is None else NOW - timedelta(minutes=resubmitted_minutes_ago)
    return DeadLetter.objects.create(
        job=job, queue="mail", task="mail.send", died_at=died, attempts=1, error_class="SMTPError", message="boom",
        fingerprint="0123456789abcdef", resubmitted_at=resubmitted, resubmitted_by="op" if resubmitted else "",
    )  # fmt: skip


def test_dead_letters_show_their_total_and_page_older_and_newer(
    browser: WebClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("dashboards.views.dead_letters.PAGE", 4)
    for n in range(10):
        dead_letter(n, minutes_ago=n // 2)  # ties of two at each minute: the id orders them
    newest_first = [d.pk for d in DeadLetter.objects.order_by("-died_at", "-pk")]
    first = browser.get("/dead/")
    assert [d.pk for d in first.context["letters"]] == newest_first[:4]
    assert f"1{TO}4 of 10 dead letters" in first.content.decode() and first.context["listed"].newer is None
    second = browser.get("/dead/", {"cursor": first.context["next_cursor"]})
    assert [d.pk for d in second.context["letters"]] == newest_first[4:8]
    assert f"5{TO}8 of 10" in second.content.decode() and "← Newer" in second.content.decode()
    third = browser.get("/dead/", {"cursor": second.context["next_cursor"]})
    assert [d.pk for d in third.context["letters"]] == newest_first[8:] and third.context["next_cursor"] is None
    back = browser.get("/dead/", {"newer": third.context["listed"].newer})
    assert [d.pk for d in back.context["letters"]] == newest_first[4:8] and f"5{TO}8 of 10" in back.content.decode()
    top = browser.get("/dead/", {"newer": back.context["listed"].newer})  # fewer than a page above: the first page
    assert [d.pk for d in top.context["letters"]] == newest_first[:4] and top.context["listed"].newer is None
    # A page's paging is no filter: a bulk action from a page down the list still selects what the filter matches.
    assert parse_selection("deadletter", {"queue": "mail", "newer": "x", "cursor": "y"}).filter == {"queue": ["mail"]}
    stale = browser.get("/dead/", {"newer": "garbage"})
    assert stale.context["bad_cursor"] and [d.pk for d in stale.context["letters"]] == newest_first[:4]


def test_the_total_past_the_groups_limit_is_counted(browser: WebClient) -> None:
    for n in range(GROUPS + 2):  # a cause each, and one more death of the first: more causes than the page groups
        letter = dead_letter(n, minutes_ago=n)
        DeadLetter.objects.filter(pk=letter.pk).update(fingerprint=f"{n:016x}")
    dead_letter(GROUPS + 2, minutes_ago=0)
    DeadLetter.objects.filter(job_id=f"01JEDGE{GROUPS + 2:019d}").update(fingerprint=f"{0:016x}")
    page = browser.get("/dead/")
    assert len(page.context["groups"]) == GROUPS and page.context["listed"].total == GROUPS + 3
    assert f"1{TO}{GROUPS + 3} of {GROUPS + 3} dead letters" in page.content.decode()


def test_a_resubmitted_dead_letter_says_what_became_of_its_new_run() -> None:
    succeeded = dead_letter(1, 30, state="completed", resubmitted_minutes_ago=20)
    Job.objects.filter(pk=succeeded.job_id).update(finished_at=NOW - timedelta(minutes=19))
    again = dead_letter(2, 30, resubmitted_minutes_ago=20)
    dead_letter(2, 10)  # the same job died again after the resubmit
    running = dead_letter(3, 30, state="running", resubmitted_minutes_ago=1)
    waiting = dead_letter(4, 30, state="queued", resubmitted_minutes_ago=1)
    unseen = dead_letter(5, 30, resubmitted_minutes_ago=0)  # the mirror has not seen its requeue yet
    gone = dead_letter(6, 30, resubmitted_minutes_ago=5)
    open_one = dead_letter(7, 5)
    letters = [succeeded, again, running, waiting, unseen, gone, open_one]
    Job.objects.filter(pk=gone.job_id).delete()  # cascades to its dead letters: the page still had it
    outcome = {pk: (r.text, r.tone) for pk, r in reruns(letters).items()}
    assert outcome == {
        succeeded.pk: ("succeeded", "ok"), again.pk: ("failed again", "bad"), running.pk: ("still running", "info"),
        waiting.pk: ("queued, not run yet", "info"), unseen.pk: ("about to run", "info"), gone.pk: ("job deleted", ""),
    }  # fmt: skip
    assert reruns(letters)[again.pk].at == NOW - timedelta(minutes=10)


def test_a_resubmit_through_the_engine_shows_failed_again_then_succeeded(
    client: Any, mirror: Any, r: Any, browser: WebClient
) -> None:
    job_id = client.enqueue("edges.flaky").id
    run_worker(r, ["edges"])
    mirror.drain()
    operator = User.objects.get()
    for broken, expected in ((True, "failed again"), (False, "succeeded")):
        BROKEN["edges.flaky"] = broken
        try:
            assert actions.retry(operator, job_id).ok
            run_worker(r, ["edges"])
        finally:
            BROKEN["edges.flaky"] = True
        mirror.drain()
        page = browser.get("/dead/", {"status": "resubmitted"})
        html = page.content.decode()
        assert f'href="/jobs/{job_id}/#attempts"><span class="badge {"bad" if broken else "ok"}">{expected}' in html
    assert DeadLetter.objects.filter(job_id=job_id).count() == 2


def test_a_queue_page_draws_the_overviews_charts_for_its_queue_and_polls_in_parts(
    client: Any, r: Any, browser: WebClient
) -> None:
    for i in range(3):
        client.enqueue("examples.echo", {"i": i})
    client.enqueue("examples.fail", {"message": "nope"}, max_retries=0)
    run_worker(r, ["examples.echo", "examples.fail"])
    browser.post("/queues/examples.echo/pause", {"action": "pause", "reason": "deploy"})
    browser.post("/queues/examples.fail/pause", {"action": "pause"})
    page = browser.get("/queues/examples.echo/", {"range": "day"})
    figures = page.context["figures"]
    assert [t["name"] for t in figures["depth"]["data"]] == ["queued", "scheduled", "running"]
    completed, failed, _ = figures["throughput"]["data"]
    assert sum(completed["y"]) > 0 and sum(failed["y"]) == 0  # this queue's jobs, not examples.fail's
    assert figures["run"] is not None and figures["wait"] is not None
    [note] = figures["throughput"]["layout"]["annotations"]  # its own pause marked, not the other queue's
    assert note["text"] == "pause examples.echo"
    html = page.content.decode()
    assert 'id="queue-charts"' in html and "chart-throughput" in html and 'aria-current="true">Last day' in html
    polls = {
        part: browser.get("/queues/examples.echo/", {"part": part}, headers={"HX-Request": "true"}).content.decode()
        for part in ("tiles", "live", "charts")
    }
    assert 'id="queue-tiles"' in polls["tiles"] and "chart-depth" not in polls["tiles"]
    assert 'id="queue-live"' in polls["live"] and "chart-depth" not in polls["live"] and "<html" not in polls["live"]
    assert 'id="queue-charts"' in polls["charts"] and "queue-live" not in polls["charts"]
    assert "queue-tiles" not in polls["live"] + polls["charts"]  # each poll renders (and reads for) its part alone
    counts = {state: jobs for state, _, jobs in page.context["tabs"]}
    assert counts["completed"] == 3 and counts["queued"] == 0
    assert "Unknown range" in browser.get("/queues/examples.echo/", {"range": "year"}).content.decode()
