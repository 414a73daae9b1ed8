"""Celery's canvas and app object without a worker: signatures, `|`, chain/group/chord/map/starmap/chunks run here
with `.apply()` (Celery's eager mode), link / link_error, the app's settings (lazily read, what is ignored logged
once), task_always_eager, routes, refused task options, send_task and a group sent to Redis
(tests/processes/test_celery_canvas.py runs the canvas on a worker)."""

import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from jobconsole import celery as celery_module
from jobconsole.canvas import ChordError, NotRegistered
from jobconsole.celery import (
    FAILURE,
    PENDING,
    SUCCESS,
    AsyncResult,
    Celery,
    EagerResult,
    GroupResult,
    Signature,
    chain,
    chord,
    group,
    shared_task,
    signature,
)
from jobconsole.core import Client, InvalidJob, JobState
from jobconsole.core.ids import new_job_id
from tests.celery_tasks import add, fail, identity, mul, on_error, retried, xsum
from tests.conftest import PROJECT


@pytest.fixture
def client(settings: Any, r: Any, redis_url: str) -> Iterator[Client]:
    from jobconsole.engine import get_client

    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": redis_url}
    yield get_client()


@pytest.fixture(autouse=True)
def current_apps() -> Iterator[None]:
    """Apps made by a test stop being current after it (shared tasks read the current app's settings)."""
    before = list(celery_module._current)
    yield
    celery_module._current[:] = before


def test_signatures_are_partial_calls() -> None:
    sig = add.s(2)
    assert isinstance(sig, Signature) and (sig.task, sig.args, sig.kwargs, sig.immutable) == (add.name, (2,), {}, False)
    assert sig.type is add and repr(sig) == "tests.celery_tasks.add(2)"
    assert sig(3) == 5  # calling a signature calls the function here
    # clone: new args before the stored ones (the previous step's result goes first), kwargs and options merged.
    assert sig.clone((1,)).args == (1, 2) and add.si(2, 2).clone((1,)).args == (2, 2)
    full = add.signature((1,), {"y": 2}, countdown=10, queue="math")
    assert (full.args, full.kwargs, full.options) == ((1,), {"y": 2}, {"countdown": 10, "queue": "math"})
    assert full.set(priority=3) is full and full.options["priority"] == 3
    by_name = signature("tests.celery_tasks.mul", args=(3, 4))
    assert by_name.type is mul and by_name.apply().get() == 12
    assert signature(full.as_dict()) == full and signature(full) == full and signature(full) is not full
    with pytest.raises(NotRegistered):
        _ = signature("no.such.task").type
    frozen = add.s(1, 1)
    result = frozen.freeze()
    assert isinstance(result, AsyncResult) and frozen.id == result.id

    # `|` composes: a chain (flattened), a group followed by a step is a chord.
    piped = add.s(1, 1) | add.s(2) | (mul.s(3) | add.s(4))
    assert isinstance(piped, chain) and [t.task for t in piped.tasks] == [add.name, add.name, mul.name, add.name]
    assert (
        repr(piped) == "tests.celery_tasks.add(1, 1) | tests.celery_tasks.add(2) | tests.celery_tasks.mul(3) | "
        "tests.celery_tasks.add(4)"
    )
    grouped = group(add.s(i, i) for i in range(3)) | xsum.s()
    assert isinstance(grouped, chord) and len(grouped.tasks) == 3 and grouped.body == xsum.s()
    assert len(group(add.s(1, 1))) == 1 and len(group([add.s(1, 1), add.s(2, 2)])) == 2
    restored = signature(grouped.as_dict())
    assert isinstance(restored, chord) and restored.apply().get() == 6


def test_celerys_documented_canvas_examples_run_here() -> None:
    result = chain(add.s(2, 2), add.s(4), add.s(8)).apply()
    assert result.get() == 16
    assert result.parent is not None and result.parent.get() == 8 and result.parent.parent.get() == 4  # type: ignore[union-attr]
    assert group(add.s(i, i) for i in range(10)).apply().get() == [i + i for i in range(10)]
    chorded = chord((add.s(i, i) for i in range(10)), xsum.s()).apply()
    assert chorded.get() == 90
    assert isinstance(chorded.parent, GroupResult) and chorded.parent.get() == [i + i for i in range(10)]
    assert chord(add.s(i, i) for i in range(3)).apply(body=xsum.s()).get() == 6  # chord(header)(body)'s form


def test_chain_semantics_here() -> None:
    # si ignores the previous result; a group in a chain gets it, and the next step gets the group's list.
    pipeline = add.s(1, 1) | add.si(5, 5) | group(add.s(1), add.s(2)) | xsum.s()
    assert pipeline.apply().get() == 23
    assert chain(add.s(1, 1), identity.s()).apply((), {}).get() == 2
    assert chain(add.s(1), mul.s(10)).apply((4,)).get() == 50  # args of apply go to the first step
    assert group(add.s(1), mul.s(2)).apply((10,)).get() == [11, 20]  # and to every member of a group
    assert chain(group(add.s(1, 1), add.s(2, 2)), group(xsum.s(), identity.s())).apply().get() == [6, [2, 4]]

    # A failed step stops the chain (its exception raised when the next step would get its result); a failed
    # member keeps a chord's callback from running.
    with pytest.raises(ValueError, match=r"failed with \[1\]"):
        chain(fail.s(1), add.s(1)).apply()
    failed = chord([add.s(1, 1), fail.s(2)], xsum.s()).apply()
    assert failed.state == FAILURE and isinstance(failed.result, ChordError)
    with pytest.raises(ChordError, match="ValueError"):
        failed.get()

    # link runs with the result after success; link_error with (request, exc, traceback) after a failure.
    linked = add.s(2, 2)
    linked.link(mul.s(10))
    ok = linked.apply()
    assert ok.get() == 4 and [c.get() for c in ok.children] == [40]
    broken = fail.signature((7,), link_error=on_error.s())
    bad = broken.apply()
    assert bad.failed() and [c.get() for c in bad.children] == [f"{bad.id} failed: ValueError('failed with [7]')"]


def test_links_of_a_composite_are_refused_here() -> None:
    for composite in (chain(add.s(1, 1), add.s(1)), group(add.s(1, 1)), chord([add.s(1, 1)], xsum.s())):
        with pytest.raises(TypeError, match="links of a composite are not supported"):
            composite.apply(link_error=on_error.s())


def test_map_starmap_and_chunks_here() -> None:
    assert add.starmap([(1, 2), (3, 4)]).apply().get() == [3, 7]
    assert identity.map([1, "a", [2]]).apply().get() == [1, "a", [2]]
    chunked = add.chunks([(i, i) for i in range(5)], 2)
    assert len(chunked.group()) == 3 and chunked.apply().get() == [[0, 2], [4, 6], [8]]
    assert group(chunked, add.s(1, 1)).apply().get() == [[[0, 2], [4, 6], [8]], 2]  # a part of a canvas too


def test_apply_runs_retries_and_keeps_exceptions() -> None:
    done = retried.apply((2,))
    assert isinstance(done, EagerResult) and done.get() == 2 and done.state == SUCCESS and done.ready()
    assert retried.apply((5,)).failed()  # max_retries=2: three attempts
    failed = fail.apply((1,))
    assert failed.state == FAILURE and isinstance(failed.result, ValueError) and "ValueError" in str(failed.traceback)
    assert isinstance(failed.get(propagate=False), ValueError)
    with pytest.raises(ValueError):
        fail.apply((1,), throw=True)
    with pytest.raises(TypeError, match="missing a required argument"):
        add.apply((1,))


def test_the_app_reads_its_settings_when_first_needed_and_logs_what_it_ignores_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = {
        "CELERY_TASK_DEFAULT_QUEUE": "q1", "CELERY_BROKER_URL": "redis://elsewhere", "CELERY_ALWAYS_EAGER": False,
        "CELERY_TASK_SERIALIZER": "json", "CELERY_WORKER_CONCURRENCY": 8, "OTHER": 1,
    }  # fmt: skip
    app = Celery("settings", set_as_current=False)
    with caplog.at_level(logging.WARNING, logger="jobconsole.celery"):
        app.config_from_object(source, namespace="CELERY")
        app.conf.update(task_default_priority=3)  # set before anything is read: read nothing
        assert caplog.messages == []
        assert app.conf.task_default_queue == "q1" and app.conf["task_default_priority"] == 3
        assert app.conf.task_always_eager is False and app.conf.broker_url == "redis://elsewhere"
        assert "other" not in app.conf and app.conf.task_routes is None
        _ = app.conf.task_default_queue
    assert caplog.messages == [
        "Celery setting CELERY_BROKER_URL is ignored: Jobconsole uses JOBCONSOLE['REDIS_URL']",
        "Celery setting CELERY_WORKER_CONCURRENCY is ignored: use runworker --concurrency",
    ]
    # Set on app.conf, as Celery's docs set beat_schedule: logged too. Beat's signal receivers: logged, not called.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="jobconsole.celery"):
        app.conf.beat_schedule = {"every-minute": {"task": "tests.celery_tasks.add", "schedule": 60}}
        app.conf.task_always_eager = False

        @app.on_after_configure.connect
        def setup_periodic_tasks(sender: Any, **kwargs: Any) -> None:
            sender.add_periodic_task(60, add.s(1, 1))

    assert caplog.messages == [
        "Celery setting app.conf.beat_schedule is ignored: periodic jobs are JOBCONSOLE['PERIODIC'] (runscheduler)",
        "Celery app signal receiver tests.app.test_celery_canvas.test_the_app_reads_its_settings_when_first_needed_"
        "and_logs_what_it_ignores_once.<locals>.setup_periodic_tasks is not called: periodic jobs are "
        "JOBCONSOLE['PERIODIC'] (runscheduler)",
    ]
    with pytest.raises(TypeError, match="add_periodic_task"):
        setup_periodic_tasks(app)

    # An object, a module, "module:attribute", lower-case settings without a namespace.
    other = Celery("objects", set_as_current=False)
    other.config_from_object(SimpleNamespace(task_default_queue="q2", TASK_ROUTES="upper-case: not a setting"))
    assert other.conf.task_default_queue == "q2" and other.conf.task_routes is None
    other.config_from_object("django.conf:settings", namespace="CELERY")
    assert other.conf.task_default_queue == "celery"
    with pytest.raises(ImportError):
        other.config_from_object("no_such_module")
        _ = other.conf.task_default_queue
    other.config_from_object("no_such_module", silent=True)
    assert other.conf.task_default_queue == "celery"


def test_app_tasks_take_the_apps_queue_routes_priority_and_time_limit() -> None:
    app = Celery("routing", set_as_current=False)
    app.config_from_object({
        "task_default_queue": "app-default", "task_default_priority": 4, "task_time_limit": 30,
        "task_routes": [{"*.routed_*": {"queue": "globbed"}, re.compile(r".*\.by_regex$"): "regexed"},
                        lambda name, args, kwargs, options, task=None, **kw: "dynamic" if args == [0] else None],
    })  # fmt: skip

    @app.task
    def plain_app_task() -> None: ...

    @app.task(queue="mine", priority=1, name="tests.named_app_task")
    def named(x: int) -> int:
        return x

    @app.task(bind=True)
    def routed_task(self: Any, x: int) -> int:
        return x

    @app.task
    def by_regex() -> None: ...

    assert (plain_app_task.queue, plain_app_task.priority) == ("app-default", 4)
    assert plain_app_task.engine_task.timeout == 30 and plain_app_task.engine_task.queue == "app-default"
    assert (named.name, named.queue, named.priority) == ("tests.named_app_task", "mine", 1)
    assert routed_task.queue == "globbed" and by_regex.queue == "regexed"
    assert app.tasks["tests.named_app_task"] is named
    assert app._dynamic_route(routed_task.name, [0], {}) == "dynamic"


def test_always_eager_runs_calls_here(settings: Any) -> None:
    app = Celery("eager")  # current: the shared tasks read its settings
    app.conf.task_always_eager = True
    result = add.delay(2, 3)  # no Redis needed
    assert isinstance(result, EagerResult) and result.get() == 5
    assert chain(add.s(2, 2), add.s(4))().get() == 8 and chord(add.s(i, i) for i in range(3))(xsum.s()).get() == 6
    assert group(add.s(1, 1), add.s(2, 2))().get() == [2, 4]
    assert fail.delay(1).failed()
    app.conf.task_eager_propagates = True
    with pytest.raises(ValueError):
        fail.delay(1)


def test_options_jobconsole_cannot_honour_are_refused() -> None:
    for options, message in [
        ({"rate_limit": "10/m"}, "rate_limit: Jobconsole has no per-task rate limit"),
        ({"soft_time_limit": 10}, "soft_time_limit: Jobconsole has no soft time limit"),
        ({"acks_late": False}, "acks_late=False cannot be honoured"),
        ({"serializer": "pickle"}, "JSON only"),
        ({"not_an_option": 1}, "task options not supported by Jobconsole: not_an_option"),
    ]:
        with pytest.raises(TypeError, match=re.escape(message)):
            shared_task(**options)
    accepted = shared_task(acks_late=True, ignore_result=True, track_started=True, serializer="json",
                           name="tests.accepting_task")(lambda: None)  # fmt: skip
    assert accepted.name == "tests.accepting_task"
    with pytest.raises(TypeError, match="link takes a signature"):
        add.apply_async((1, 2), link=print)


def test_autodiscover_imports_the_tasks_modules_of_packages() -> None:
    app = Celery("discovering", set_as_current=False)
    app.autodiscover_tasks(["tests", "tests.app"], related_name="celery_tasks")  # tests.app has none: skipped
    assert "tests.celery_tasks.add" in app.tasks
    app.autodiscover_tasks(lambda: ["jobconsole"], related_name="tasks")
    app.autodiscover_tasks(["tests.nothing_here"], related_name="tasks", force=True)  # missing: skipped, as Celery


def test_groups_and_send_task_enqueue_and_composites_need_workflows(client: Client) -> None:
    app = Celery("sending", set_as_current=False)
    app.config_from_object({"timezone": "Europe/Paris", "task_routes": {"tests.celery_tasks.mul": "muls"}})
    sent = group(add.s(1, 1), mul.s(2, 3).set(priority=2), add.signature((3, 3), countdown=60)).apply_async()
    assert isinstance(sent, GroupResult) and len(sent) == 3
    jobs = [client.get(r.id) for r in sent]
    assert [(j.task, j.params, j.priority) for j in jobs] == [
        ("tests.celery_tasks.add", {"args": [1, 1], "kwargs": {}}, 0),
        ("tests.celery_tasks.mul", {"args": [2, 3], "kwargs": {}}, 2),
        ("tests.celery_tasks.add", {"args": [3, 3], "kwargs": {}}, 0),
    ]
    assert jobs[2].state is JobState.SCHEDULED and sent.state == PENDING and not sent.ready()
    # All validated before any is sent: one bad member, nothing enqueued.
    before = client.counts("celery")
    with pytest.raises(InvalidJob, match="priority"):
        group(add.s(5, 5), add.s(6, 6).set(priority=99)).apply_async()
    assert client.counts("celery") == before

    # send_task: by name, routed by the app; a naive eta read in the app's timezone, as Celery reads it.
    eta = datetime(2030, 1, 1, 12, 0)
    routed = app.send_task("tests.celery_tasks.mul", (2, 2), eta=eta)
    job = client.get(routed.id)
    assert job.queue == "muls" and job.state is JobState.SCHEDULED
    assert job.run_at is not None and abs(job.run_at - eta.replace(tzinfo=ZoneInfo("Europe/Paris"))) < timedelta(
        seconds=1
    )
    with pytest.raises(TypeError, match="expires"):
        app.send_task("tests.celery_tasks.mul", (2, 2), expires=10)


def test_a_canvas_with_dependencies_is_one_workflow(client: Client, r: Any) -> None:
    """A chain of chords nests into one DAG created in one call: the first steps queued, the others waiting with
    their parents' results to come; what cannot be sent refuses the whole."""

    def workflows() -> int:
        return len(r.keys("*}:wf:*"))

    canvas = chain(chord([add.s(1, 1), add.s(2, 2)], xsum.s()), group(add.s(1), mul.si(2, 3)), xsum.s())
    result = canvas.apply_async()
    assert workflows() == 1
    # The result is the last step's; .parent goes back through the group to the first chord's body and header.
    assert isinstance(result, AsyncResult) and result.state == PENDING
    grouped = result.parent
    assert isinstance(grouped, GroupResult) and len(grouped) == 2
    body = grouped.parent
    assert body is not None and isinstance(body.parent, GroupResult) and body.parent.parent is None
    header = body.parent.results
    states = [client.get(x.id).state for x in [*header, body, *grouped.results, result]]
    assert states == [JobState.QUEUED] * 2 + [JobState.WAITING] * 4
    assert client.get(body.id).params == {"args": [None], "kwargs": {}}  # the header's list goes there
    assert client.get(grouped.results[1].id).params == {"args": [2, 3], "kwargs": {}}  # si: nothing passed

    linked = add.apply_async((2, 2), link=mul.s(10), link_error=on_error.s())
    assert workflows() == 2 and [client.get(c.id).state for c in linked.children] == [JobState.WAITING] * 2
    assert client.get(linked.children[1].id).task == "celery.errback"

    # A composite's options: queue and priority for every step, countdown for the first, task_id for the last.
    last_id = new_job_id()
    routed = chain(add.s(1, 1), add.s(2).set(priority=1), group(mul.s(2), mul.s(3).set(queue="own"))).apply_async(
        queue="elsewhere", priority=3, countdown=60, task_id=last_id
    )
    assert isinstance(routed, GroupResult) and routed.id == last_id
    first, second = routed.parent.parent, routed.parent  # type: ignore[union-attr]
    jobs = [client.get(x.id) for x in (first, second, *routed.results)]
    assert [(j.queue, j.priority) for j in jobs] == [("elsewhere", 3), ("elsewhere", 1), ("elsewhere", 3),
                                                     ("own", 3)]  # fmt: skip
    assert [j.state for j in jobs] == [JobState.SCHEDULED] + [JobState.WAITING] * 3
    plain = group(add.s(1, 1), add.s(2, 2)).apply_async(queue="elsewhere", countdown=60)
    assert {(client.get(x.id).queue, client.get(x.id).state) for x in plain} == {("elsewhere", JobState.SCHEDULED)}
    with pytest.raises(TypeError, match="chain options not supported by Jobconsole: expires"):
        chain(add.s(1, 1), add.s(2)).apply_async(expires=10)

    # Refused as a whole, nothing written: a bad argument list, a bad priority, an unknown option.
    for bad in (chain(add.s(1, 1), add.s(1, 2)), chain(add.s(1, 1), add.s(1).set(priority=42)),
                chain(add.s(1, 1), add.s(1).set(expires=10))):  # fmt: skip
        with pytest.raises((TypeError, InvalidJob)):
            bad.apply_async()
    assert workflows() == 3


@pytest.mark.parametrize("first", ["jobconsole.canvas", "jobconsole.celery_workflows", "jobconsole.celery"])
def test_any_of_the_modules_may_be_imported_first(first: str) -> None:
    code = f"import {first}\nfrom jobconsole.celery import chain, shared_task\nprint(chain.__name__)"
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "chain"), done.stderr
