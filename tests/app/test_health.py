"""Health (jobconsole/health.py): Runqueue's rules on waiting time, retries and jobs past their deadline, plus
failure rates; green, yellow or red with the reasons, thresholds overridden per queue and per task."""

import pytest
from django.core.checks import run_checks

from jobconsole.core.keys import queue_keys
from jobconsole.core.store import Store
from jobconsole.health import Level, check, duration, thresholds
from tests.helpers import claim
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def health_settings(settings, **health):
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "HEALTH": health}


def waiting_since(client, r, queue: str, seconds: float) -> str:
    """A job on `queue` that has waited `seconds`."""
    job = client.enqueue("examples.echo", {}, queue=queue).id
    Store(r).drain(queue)
    r.hset(queue_keys(queue).job(job), "enqueued_at", client.queries.now_ms() - int(seconds * 1000))
    return job


def counters(client, r, queue: str, task: str, **values: int) -> None:
    """The current minute's counters of a task, as the scripts would have written them."""
    minute = client.queries.now_ms() // 60_000
    Store(r).register_queues([queue])
    r.hset(queue_keys(queue).stats, mapping={f"{minute}|{metric}|{task}": v for metric, v in values.items()})


def test_all_green_with_figures_per_queue(client, r):
    client.enqueue("examples.echo", {})
    run_worker(r, ["examples.echo"])
    health = check(queries=client.queries)
    assert (health.level, health.status, health.reasons) == (Level.GREEN, "green", [])
    [queue] = health.queues
    assert (queue.queue, queue.queued, queue.oldest_wait, queue.overdue) == ("examples.echo", 0, None, 0)
    [task] = queue.tasks
    assert (task.task, task.completed, task.failure_rate) == ("examples.echo", 1, 0.0)


def test_a_job_waiting_past_the_warn_then_the_alarm_delay(client, r):
    job = waiting_since(client, r, "q", 200)
    health = check(queries=client.queries)
    assert health.level is Level.YELLOW and health.level.code == "y"
    [reason] = health.reasons
    assert (reason.rule, reason.queue, reason.task, reason.threshold) == ("delay", "q", None, 180.0)
    assert reason.message == "Queue q: the oldest waiting job has waited 3 min 20 s (warning at 3 min)."
    r.hset(queue_keys("q").job(job), "enqueued_at", client.queries.now_ms() - 700_000)  # the same job, later
    [reason] = check(queries=client.queries).reasons
    assert reason.level is Level.RED
    assert reason.message == "Queue q: the oldest waiting job has waited 11 min 40 s (alarm at 10 min)."


def test_a_paused_queue_waits_on_purpose(client, r):
    waiting_since(client, r, "q", 900)
    client.pause("q")
    health = check(queries=client.queries)
    assert health.level is Level.GREEN and health.queues[0].paused
    assert health.details()["delays"][0]["paused"] is True


def test_delay_thresholds_per_queue(client, r, engine_settings):
    health_settings(engine_settings, QUEUES={"fast": {"WARN_DELAY": 60, "ALARM_DELAY": 0}})
    waiting_since(client, r, "fast", 100)
    waiting_since(client, r, "slow", 100)
    waiting_since(client, r, "other", 2000)
    health = check(["fast", "slow", "other"], queries=client.queries)
    levels = {q.queue: q.level for q in health.queues}
    assert levels == {"fast": Level.YELLOW, "slow": Level.GREEN, "other": Level.RED}
    assert [x.queue for x in health.reasons] == ["other", "fast"]  # worst first
    waiting_since(client, r, "fast2", 5000)
    health_settings(engine_settings, QUEUES={"fast2": {"WARN_DELAY": 60, "ALARM_DELAY": 0}})
    assert check(["fast2"], queries=client.queries).level is Level.YELLOW  # its alarm level is turned off


def test_retries_past_the_warn_and_alarm_counts(client, r, engine_settings):
    counters(client, r, "q", "t.x", completed=1, failed=3, retried=3, retry_max=3)
    health = check(queries=client.queries)
    [reason] = health.reasons
    assert (reason.level, reason.rule, reason.task, reason.value) == (Level.YELLOW, "retries", "t.x", 3)
    assert reason.message == "Task t.x on queue q: a job was retried 3 times in the last 15 min (warning at 3)."
    counters(client, r, "q", "t.x", retry_max=8)
    assert check(queries=client.queries).reasons[0].level is Level.RED
    health_settings(engine_settings, TASKS={"t.x": {"WARN_RETRIES": 9, "ALARM_RETRIES": 0}})
    assert check(queries=client.queries).level is Level.GREEN
    assert thresholds("q", "t.x").warn_retries == 9 and thresholds("q", "t.y").warn_retries == 3


def test_retries_of_real_jobs(client, r, engine_settings):
    health_settings(engine_settings, WARN_RETRIES=2)
    client.enqueue("examples.fail", {"message": "boom"})  # retried twice, then dead
    run_worker(r, ["examples.fail"], burst_horizon=2.0)
    health = check(queries=client.queries)
    assert [(x.rule, x.level, x.value) for x in health.reasons] == [("retries", Level.YELLOW, 2)]
    assert health.details()["retries"] == [
        {"topic": "examples.fail", "queue": "examples.fail", "task": "examples.fail", "max_retries": 2}
    ]


def test_failure_rates_once_there_are_enough_attempts(client, r, engine_settings):
    counters(client, r, "q", "t.half", completed=5, failed=5)
    counters(client, r, "q", "t.few", completed=1, failed=8)  # 9 attempts: too few to judge
    counters(client, r, "q", "t.some", completed=20, failed=3)
    health = check(queries=client.queries)
    found = {(x.task, x.level) for x in health.reasons}
    assert found == {("t.half", Level.RED), ("t.some", Level.YELLOW)}
    half = next(x for x in health.reasons if x.task == "t.half")
    assert half.message == "Task t.half on queue q: 5 of 10 attempts failed in the last 15 min (50%; alarm at 50%)."
    health_settings(engine_settings, QUEUES={"q": {"MIN_ATTEMPTS": 5}}, TASKS={"t.half": {"ALARM_FAILURE_RATE": 0.9}})
    found = {(x.task, x.level) for x in check(queries=client.queries).reasons}
    assert found == {("t.half", Level.YELLOW), ("t.few", Level.RED), ("t.some", Level.YELLOW)}


def test_running_jobs_past_their_deadline_are_red(client, r, engine_settings):
    health_settings(engine_settings, OVERDUE_GRACE=5.0)
    client.enqueue("examples.echo", {}, queue="q")
    client.enqueue("examples.echo", {}, queue="q")
    leases = claim(r, "q", 2)
    now = client.queries.now_ms()
    r.zadd(queue_keys("q").active, {leases[0].id: now - 60_000, leases[1].id: now - 2_000})  # one within grace
    health = check(queries=client.queries)
    [reason] = health.reasons
    assert (reason.level, reason.rule, reason.value) == (Level.RED, "overdue", 1)
    assert reason.message == (
        "Queue q: 1 job is running more than 5 s past its lease deadline; is a worker or runrecoverer running?"
    )
    assert health.details()["failures"] == [{"topic": "q", "queue": "q", "failures": 1}]


def test_details_have_runqueues_shape(client, r):
    waiting_since(client, r, "q", 10)
    counters(client, r, "q", "t.x", completed=4, failed=1, retry_max=1)
    details = check(queries=client.queries).details()
    assert set(details) == {"delays", "retries", "failures", "failure_rates"}
    [delay] = details["delays"]
    assert delay["queue"] == "q" and 10 <= delay["delay"] < 15
    assert details["retries"] == [{"topic": "t.x", "queue": "q", "task": "t.x", "max_retries": 1}]  # Runqueue's topic
    assert details["failure_rates"] == [{"queue": "q", "task": "t.x", "attempts": 5, "failed": 1, "rate": 0.2}]


def test_threshold_overrides_are_checked(settings):
    settings.JOBCONSOLE = {
        "HEALTH": {"QUEUES": {"q": {"WARN_DELAY": "soon"}}, "TASKS": {"t": {"WARN_DELAY": 5}}},
    }
    messages = sorted(e.msg for e in run_checks(tags=["jobconsole"]))
    assert messages == [
        "JOBCONSOLE[\"HEALTH\"][\"QUEUES\"]: WARN_DELAY (for queue 'q') must be a number, not 'soon'.",
        "JOBCONSOLE[\"HEALTH\"][\"TASKS\"]: 'WARN_DELAY' (for task 't') is not a threshold a task can set; known: "
        "WARN_RETRIES, ALARM_RETRIES, WARN_FAILURE_RATE, ALARM_FAILURE_RATE, MIN_ATTEMPTS.",
    ]
    settings.JOBCONSOLE = {"HEALTH": {"QUEUES": {"q": 3}}}
    assert [e.id for e in run_checks(tags=["jobconsole"])] == ["jobconsole.E003"]


def test_durations_read_as_people_say_them():
    assert [duration(s) for s in (0, 45, 60, 185, 3600, 7800, 90_000)] == [
        "0 s", "45 s", "1 min", "3 min 5 s", "1 h", "2 h 10 min", "1 d 1 h",
    ]  # fmt: skip
