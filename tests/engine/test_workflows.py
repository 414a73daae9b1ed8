"""Jobs that wait for other jobs (core/workflows.py, lua/_deps.lua) against a real redis-server: a workflow is
created all or nothing, dependents run after their parents, a failed parent cancels its dependents or lets them run,
a resubmitted dead member continues its workflow, a workflow can be cancelled, results are passed."""

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from jobconsole.core import Client, JobSpec, JobState, JobStateConflict, TaskRegistry
from jobconsole.core.compose import batch, chain, chord, group, job
from jobconsole.core.errors import InvalidJob, JobNotFound
from jobconsole.core.keys import queue_keys
from jobconsole.core.store import Store
from jobconsole.core.workflows import ARGS, ARGS_LIST, RUN, InvalidWorkflow, Step
from tests.helpers import claim, complete, run_burst

LOG: list[str] = []


class Boom(Exception):
    pass


@pytest.fixture
def registry() -> TaskRegistry:
    reg = TaskRegistry()

    @reg.task(name="w.add", queue="q")
    def add(x: int = 0, y: int = 0) -> int:
        LOG.append(f"add {x} {y}")
        return x + y

    @reg.task(name="w.note", queue="q2")
    def note(tag: str, results: dict[str, Any] | None = None) -> Any:
        LOG.append(tag)
        return {"tag": tag, "results": results}

    @reg.task(name="w.boom", queue="q", max_retries=0)
    def boom(tag: str = "boom") -> None:
        LOG.append(tag)
        raise Boom("it broke")

    @reg.task(name="w.call", queue="q")
    def call(args: list[Any], kwargs: dict[str, Any]) -> Any:
        LOG.append(f"call {args}")
        return sum(a if isinstance(a, int) else sum(a) for a in args)

    return reg


@pytest.fixture(autouse=True)
def clear_log() -> None:
    LOG.clear()


@pytest.fixture
def client(r: "redis.Redis", registry: TaskRegistry) -> Client:
    return Client(r, registry)


def run_all(r: "redis.Redis", registry: TaskRegistry) -> None:
    run_burst(r, registry, ["q", "q2"])


def keys_snapshot(r: "redis.Redis") -> set[str]:
    return set(r.keys("*"))


def note(tag: str, **options: Any) -> JobSpec:
    return JobSpec(task="w.note", params={"tag": tag}, **options)


# --- creation ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "step", "words"),
    [
        ([Step("a", JobSpec(task="w.nope"))], "a", "unknown task"),
        ([Step("a", JobSpec(task="w.add", params={"z": 1}))], "a", "unknown parameter"),
        ([Step("a", note("a")), Step("b", note("b"), after=["c"])], "b", "not a step"),
        ([Step("a", note("a"), after=["b"]), Step("b", note("b"), after=["a"])], "a", "a cycle: a waits for b"),
        ([Step("a", note("a")), Step("a", note("b"))], "a", "two steps"),
        ([Step("a", note("a")), Step("b", note("b"), after={"a": "maybe"})], "b", "on_parent_failure"),
        ([Step("a", note("a")), Step("b", note("b", unique_key="k"), after=["a"])], "b", "unique_key"),
        ([Step("a", note("a"), pass_results="results")], "a", "needs a parent"),
        ([Step("a", note("a")), Step("b", note("b"), after=["a"], pass_results="nope")], "b", "unknown parameter"),
        ([Step("a|b", note("a"))], "a|b", "step name"),
    ],
)
def test_a_bad_workflow_is_refused_naming_the_step_and_changes_nothing(
    r: "redis.Redis", client: Client, steps: list[Step], step: str, words: str
) -> None:
    client.enqueue("w.add", {"x": 1})  # something already there
    before = keys_snapshot(r)
    with pytest.raises(InvalidWorkflow) as refused:
        client.enqueue_workflow([Step("ok", note("ok")), *steps])
    assert refused.value.step == step and words in str(refused.value)
    assert keys_snapshot(r) == before


def test_a_longer_cycle_is_named_in_order(client: Client) -> None:
    steps = [Step("a", note("a")), Step("b", note("b"), after=["a", "d"]), Step("c", note("c"), after=["b"]),
             Step("d", note("d"), after=["c"])]  # fmt: skip
    with pytest.raises(InvalidWorkflow, match="a cycle: b waits for d waits for c waits for b"):
        client.enqueue_workflow(steps)


def test_a_taken_job_id_refuses_the_whole_workflow(r: "redis.Redis", client: Client) -> None:
    taken = client.enqueue("w.note", {"tag": "x"}).id
    client.materialize("q2")
    before = keys_snapshot(r)
    with pytest.raises(InvalidWorkflow, match="taken") as refused:
        client.enqueue_workflow([Step("a", note("a")), Step("b", note("b", id=taken), after=["a"])])
    assert refused.value.step == "b"
    assert keys_snapshot(r) == before


def test_creation_states_and_a_repeated_call_is_idempotent(r: "redis.Redis", client: Client) -> None:
    steps = [Step("a", note("a")), Step("b", note("b"), after=["a"]), Step("c", note("c", delay=60))]
    made = client.enqueue_workflow(steps, name="first", id="01J00000000000000000000000")
    assert made.created and made.states_by_step == {
        "a": JobState.QUEUED, "b": JobState.WAITING, "c": JobState.SCHEDULED,
    }  # fmt: skip
    assert client.get(made.job_ids_by_step["b"]).state is JobState.WAITING
    assert r.zcard(queue_keys("q2").sets["waiting"]) == 1
    again = client.enqueue_workflow(steps, name="first", id="01J00000000000000000000000")
    assert not again.created and again.job_ids_by_step == made.job_ids_by_step
    view = client.queries.workflows.get(made.workflow_id, made.queue)
    assert view is not None and view.name == "first" and view.counts() == {"queued": 1, "waiting": 1, "scheduled": 1}


# --- running ---------------------------------------------------------------------------------------------


def test_a_diamond_runs_in_order_across_queues(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    made = client.enqueue_workflow(
        [
            Step("top", JobSpec(task="w.add", params={"x": 1, "y": 2})),
            Step("left", note("left"), after=["top"]),
            Step("right", JobSpec(task="w.add", params={"x": 3}), after=["top"]),
            Step("bottom", note("bottom"), after=["left", "right"], pass_results="results"),
        ]
    )
    run_all(r, registry)
    assert LOG[0] == "add 1 2" and LOG[-1] == "bottom" and sorted(LOG[1:3]) == ["add 3 0", "left"]
    bottom = client.get(made.job_ids_by_step["bottom"])
    assert bottom.state is JobState.COMPLETED
    assert bottom.result == {"tag": "bottom", "results": {"left": {"tag": "left", "results": None}, "right": 3}}
    view = client.queries.workflows.get(made.workflow_id, made.queue)
    assert view is not None and view.counts() == {"completed": 4}
    links = client.queries.workflows.links(made.job_ids_by_step["bottom"], "q2")
    assert [(p.step, p.policy, p.ended, p.queue) for p in links.parents] == [
        ("left", "cancel", "completed", "q2"), ("right", "cancel", "completed", "q"),
    ]  # fmt: skip
    assert client.queries.workflows.links(made.job_ids_by_step["top"], "q").children == sorted(
        [("q2", made.job_ids_by_step["left"]), ("q", made.job_ids_by_step["right"])]
    )
    for step in view.steps:
        assert len(client.get(step.job_id).history) == 1


def test_a_dependent_never_starts_before_its_parent_ends(r: "redis.Redis", client: Client) -> None:
    made = client.enqueue_workflow([Step("a", note("a")), Step("b", note("b"), after=["a"])])
    [lease] = claim(r, "q2")
    assert lease.id == made.job_ids_by_step["a"]
    assert claim(r, "q2") == []  # b waits
    assert complete(r, "q2", lease.id, lease.token, '"A"') == 1
    [second] = claim(r, "q2")
    assert second.id == made.job_ids_by_step["b"]
    # A late, repeated ack of the parent releases nothing again.
    assert complete(r, "q2", lease.id, lease.token, '"A"') == 2
    assert claim(r, "q2") == []


def test_a_failed_parent_cancels_its_dependents_transitively(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    made = client.enqueue_workflow(
        [
            Step("a", JobSpec(task="w.boom")),
            Step("b", note("b"), after=["a"]),
            Step("c", note("c"), after=["b"]),
            Step("side", note("side")),
            Step("d", note("d"), after=["side", "c"]),
        ]
    )
    run_all(r, registry)
    states = {s: client.get(i).state for s, i in made.job_ids_by_step.items()}
    assert states == {"a": JobState.DEAD, "b": JobState.CANCELLED, "c": JobState.CANCELLED,
                      "side": JobState.COMPLETED, "d": JobState.CANCELLED}  # fmt: skip
    assert sorted(LOG) == ["boom", "side"]


def test_the_run_policy_runs_dependents_of_a_failed_parent(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    made = client.enqueue_workflow(
        [
            Step("ok", JobSpec(task="w.add", params={"x": 5})),
            Step("bad", JobSpec(task="w.boom")),
            Step("after", note("after"), after={"ok": "cancel", "bad": RUN}, pass_results="results"),
        ]
    )
    run_all(r, registry)
    after = client.get(made.job_ids_by_step["after"])
    assert after.state is JobState.COMPLETED and after.result["results"] == {"ok": 5, "bad": None}


def test_resubmitting_a_dead_member_continues_the_workflow(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    made = client.enqueue_workflow(
        [
            Step("a", JobSpec(task="w.boom", params={"tag": "a"})),
            Step("b", note("b"), after=["a"]),
            Step("c", note("c"), after=["b"]),
        ]
    )
    ids = made.job_ids_by_step
    run_all(r, registry)
    assert client.get(ids["c"]).state is JobState.CANCELLED
    # Make `a` succeed this time (an operator would fix what it calls): swap its task.
    r.hset(queue_keys("q").job(ids["a"]), "task", "w.add")
    r.hset(queue_keys("q").job(ids["a"]), "params", '{"x": 7}')
    client.requeue(ids["a"])
    assert client.get(ids["b"]).state is JobState.WAITING and client.get(ids["c"]).state is JobState.WAITING
    run_all(r, registry)
    assert [client.get(ids[s]).state for s in "abc"] == [JobState.COMPLETED] * 3
    assert LOG == ["a", "add 7 0", "b", "c"]


def test_a_member_with_another_dead_parent_stays_cancelled_when_one_comes_back(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    made = client.enqueue_workflow(
        [
            Step("a", JobSpec(task="w.boom", params={"tag": "a"})),
            Step("b", JobSpec(task="w.boom", params={"tag": "b"})),
            Step("c", note("c"), after=["a", "b"]),
        ]
    )
    ids = made.job_ids_by_step
    run_all(r, registry)
    client.requeue(ids["a"])
    assert client.get(ids["c"]).state is JobState.CANCELLED
    r.hset(queue_keys("q").job(ids["b"]), "task", "w.add")
    r.hset(queue_keys("q").job(ids["b"]), "params", "{}")
    client.requeue(ids["b"])
    assert client.get(ids["c"]).state is JobState.WAITING  # a is still due to run again
    r.hset(queue_keys("q").job(ids["a"]), "task", "w.add")
    r.hset(queue_keys("q").job(ids["a"]), "params", "{}")
    run_all(r, registry)
    assert client.get(ids["c"]).state is JobState.COMPLETED


def test_cancelling_a_workflow_cancels_what_has_not_run(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    made = client.enqueue_workflow(
        [
            Step("a", note("a")),
            Step("b", note("b"), after={"a": RUN}),
            Step("c", JobSpec(task="w.add"), after=["b"]),
            Step("d", JobSpec(task="w.add")),
        ]
    )
    ids = made.job_ids_by_step
    [lease] = claim(r, "q2")  # a runs
    assert client.cancel_workflow(made.workflow_id, made.queue) == (3, 1)
    assert client.cancel_workflow(made.workflow_id, made.queue) == (0, 0)
    assert complete(r, "q2", lease.id, lease.token) == 1  # a ignored the request and finished
    run_all(r, registry)
    assert LOG == []
    assert [client.get(ids[s]).state for s in "abcd"] == [JobState.COMPLETED] + [JobState.CANCELLED] * 3
    view = client.queries.workflows.get(made.workflow_id, made.queue)
    assert view is not None and view.cancelled_at
    with pytest.raises(JobNotFound):
        client.cancel_workflow("01J00000000000000000000000", "q")


def test_cancelling_a_waiting_job_cancels_its_dependents(r: "redis.Redis", client: Client) -> None:
    made = client.enqueue_workflow(
        [Step("a", note("a")), Step("b", note("b"), after=["a"]), Step("c", note("c"), after={"b": RUN})]
    )
    ids = made.job_ids_by_step
    assert client.cancel(ids["b"]) == "cancelled"
    assert client.get(ids["c"]).state is JobState.QUEUED  # its one parent ended; it runs anyway
    made = client.enqueue_workflow([Step("a", note("a")), Step("b", note("b"), after=["a"]),
                                    Step("c", note("c"), after=["b"])])  # fmt: skip
    assert client.cancel(made.job_ids_by_step["b"]) == "cancelled"
    assert client.get(made.job_ids_by_step["c"]).state is JobState.CANCELLED


def test_chain_results_as_first_argument(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    made = client.enqueue_workflow(
        [
            Step("one", JobSpec(task="w.call", params={"args": [2, 2], "kwargs": {}})),
            Step("two", JobSpec(task="w.call", params={"args": [4], "kwargs": {}}), after=["one"], pass_results=ARGS),
            Step("three", JobSpec(task="w.call", params={"args": [8], "kwargs": {}}), after=["two"],
                 pass_results=ARGS),
        ]
    )  # fmt: skip
    run_all(r, registry)
    assert client.get(made.job_ids_by_step["three"]).result == 16
    assert client.get(made.job_ids_by_step["two"]).params == {"args": [4, 4], "kwargs": {}}


def test_a_callback_gets_a_list_of_results(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    members = [Step(f"m{i}", JobSpec(task="w.add", params={"x": i, "y": i})) for i in range(10)]
    callback = Step("sum", JobSpec(task="w.call", params={"args": [], "kwargs": {}}),
                    after=[m.name for m in members], pass_results=ARGS_LIST)  # fmt: skip
    made = client.enqueue_workflow([*members, callback])
    run_all(r, registry)
    assert client.get(made.job_ids_by_step["sum"]).result == 90


# --- depends_on ------------------------------------------------------------------------------------------


def test_depends_on_waits_for_jobs_already_enqueued(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    a = client.enqueue("w.add", {"x": 1})
    b = client.enqueue("w.note", {"tag": "b"})
    c = client.enqueue("w.note", {"tag": "c"}, depends_on=[a, b.id], pass_results="results")
    assert c.state is JobState.WAITING and c.created
    again = client.enqueue("w.note", {"tag": "c"}, depends_on=[a, b.id], id=c.id)
    assert again.status == "exists"
    run_all(r, registry)
    assert client.get(c.id).result == {"tag": "c", "results": {a.id: 1, b.id: {"tag": "b", "results": None}}}


def test_depends_on_a_finished_or_missing_job(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    a = client.enqueue("w.add", {"x": 1})
    bad = client.enqueue("w.boom")
    run_all(r, registry)
    assert client.enqueue("w.add", depends_on=[a]).state is JobState.QUEUED
    assert client.enqueue("w.add", depends_on=[bad]).state is JobState.CANCELLED
    assert client.enqueue("w.add", depends_on=[bad], allow_dependency_failures=True).state is JobState.QUEUED
    with pytest.raises(JobNotFound):
        client.enqueue("w.add", depends_on=[("q", "01J00000000000000000000000")])
    with pytest.raises(InvalidJob):
        client.enqueue("w.add", depends_on=[])


def test_a_deleted_parent_counts_as_failed(r: "redis.Redis", client: Client) -> None:
    a = client.enqueue("w.add", {"x": 1})
    b = client.enqueue("w.add", depends_on=[a])
    c = client.enqueue("w.add", depends_on=[a], allow_dependency_failures=True)
    client.delete(a.id)
    assert client.get(b.id).state is JobState.CANCELLED
    assert client.get(c.id).state is JobState.QUEUED


def test_a_waiting_job_cannot_be_requeued(client: Client) -> None:
    a = client.enqueue("w.add", {"x": 1})
    b = client.enqueue("w.add", depends_on=[a])
    with pytest.raises(JobStateConflict):
        client.requeue(b.id)


# --- fan-in ------------------------------------------------------------------------------------------------


def test_a_fan_in_of_500_fires_its_callback_once(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    members = [Step(f"m{i}", JobSpec(task="w.add", params={"x": i})) for i in range(500)]
    callback = Step("done", note("done"), after=[m.name for m in members], pass_results="results")
    made = client.enqueue_workflow([*members, callback])
    run_all(r, registry)
    done = client.get(made.job_ids_by_step["done"])
    assert done.state is JobState.COMPLETED and len(done.history) == 1 and LOG.count("done") == 1
    assert done.result["results"] == {f"m{i}": i for i in range(500)}


# --- chains, groups, chords, batches (core/compose.py) -----------------------------------------------------


def call(*args: Any) -> JobSpec:
    return JobSpec(task="w.call", params={"args": list(args), "kwargs": {}})


def test_celery_canvas_examples(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    made = client.enqueue_workflow(chain(call(2, 2), call(4), call(8)))
    grouped = client.enqueue_workflow(group(call(i, i) for i in range(10)))
    chorded = client.enqueue_workflow(chord((call(i, i) for i in range(10)), call()))
    run_all(r, registry)
    assert client.get(made.job_ids_by_step["chain.2"]).result == 16
    assert sorted(client.get(i).result for i in grouped.job_ids_by_step.values()) == [2 * i for i in range(10)]
    assert client.get(chorded.job_ids_by_step["chord.body"]).result == 90
    assert client.get(chorded.job_ids_by_step["chord.body"]).params["args"] == [[2 * i for i in range(10)]]


def test_nested_flows_and_immutable_links(r: "redis.Redis", client: Client, registry: TaskRegistry) -> None:
    flow = chain(call(1), group(chain(call(10), call(100)), call(1000)), job(call(5), immutable=True), call(7))
    made = client.enqueue_workflow(flow)
    run_all(r, registry)
    ids = made.job_ids_by_step
    assert sorted(ids) == ["chain.0", "chain.1.group.0.chain.0", "chain.1.group.0.chain.1",
                           "chain.1.group.1", "chain.2", "chain.3"]  # fmt: skip
    # 1 -> (1+10 -> 11+100 = 111, 1+1000 = 1001) -> 5 (takes nothing) -> 5+7
    assert client.get(ids["chain.1.group.0.chain.1"]).result == 111
    assert client.get(ids["chain.1.group.1"]).result == 1001
    assert client.get(ids["chain.2"]).params["args"] == [5]
    assert client.get(ids["chain.3"]).result == 12
    order = [client.get(ids[s]).history[0].started_at for s in ("chain.0", "chain.1.group.1", "chain.2", "chain.3")]
    assert order == sorted(order)


@pytest.mark.parametrize("fail", [False, True])
def test_batch_callbacks(r: "redis.Redis", client: Client, registry: TaskRegistry, fail: bool) -> None:
    members = [JobSpec(task="w.add", params={"x": i}) for i in range(5)]
    if fail:
        members.append(JobSpec(task="w.boom"))
    made = client.enqueue_workflow(
        batch(members, on_complete=note("complete"), on_success=note("success"), on_death=note("death"),
              pass_results="results")
    )  # fmt: skip
    run_all(r, registry)
    states = {s: client.get(made.job_ids_by_step[f"batch.{s}"]).state for s in ("complete", "success", "death")}
    ran = JobState.COMPLETED
    assert states == ({"complete": ran, "success": JobState.CANCELLED, "death": ran} if fail else
                      {"complete": ran, "success": ran, "death": JobState.CANCELLED})  # fmt: skip
    assert sorted(t for t in LOG if t in ("complete", "success", "death")) == (
        ["complete", "death"] if fail else ["complete", "success"]
    )


# --- every way a job ends releases its dependents -----------------------------------------------------------


def test_a_parent_lost_with_its_worker_and_out_of_attempts_cancels_its_dependents(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    @registry.task(name="w.short", queue="q", visibility_timeout=0.05, max_retries=0)
    def short() -> None:
        pass

    made = client.enqueue_workflow(
        [Step("a", JobSpec(task="w.short")), Step("b", note("b"), after=["a"]),
         Step("c", note("c"), after={"a": RUN})]
    )  # fmt: skip
    [lease] = claim(r, "q")  # its worker dies: the lease runs out
    time.sleep(0.1)
    recovered = Store(r).recover("q", limit=10, outage_ms=0, ttl_ms=0)
    assert recovered.ended == [lease.id]
    states = {s: client.get(i).state for s, i in made.job_ids_by_step.items()}
    assert states == {"a": JobState.DEAD, "b": JobState.CANCELLED, "c": JobState.QUEUED}


def test_a_dropped_parent_counts_as_failed(r: "redis.Redis", client: Client) -> None:
    a = client.enqueue("w.add", {"x": 1})
    b = client.enqueue("w.add", depends_on=[a])
    [lease] = claim(r, "q")
    store = Store(r)
    assert store.run(store.release_call("q", lease.id, lease.token, "no such task here", drop=True))
    assert client.get(b.id).state is JobState.CANCELLED


def test_a_dependent_delay_counts_from_its_release(r: "redis.Redis", client: Client) -> None:
    made = client.enqueue_workflow([Step("a", note("a")), Step("b", note("b", delay=60), after=["a"])])
    [lease] = claim(r, "q2")
    complete(r, "q2", lease.id, lease.token)
    b = client.get(made.job_ids_by_step["b"])
    assert b.state is JobState.SCHEDULED and b.run_at is not None
    assert 55 < (b.run_at - client.queries.now()).total_seconds() <= 60


def test_requeuing_a_cancelled_dependent_runs_it_with_the_results_it_has(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    made = client.enqueue_workflow(
        [Step("ok", JobSpec(task="w.add", params={"x": 2})), Step("bad", JobSpec(task="w.boom")),
         Step("after", note("after"), after=["ok", "bad"], pass_results="results")]
    )  # fmt: skip
    run_all(r, registry)
    after = made.job_ids_by_step["after"]
    assert client.get(after).state is JobState.CANCELLED
    client.requeue(after)
    run_all(r, registry)
    assert client.get(after).result == {"tag": "after", "results": {"ok": 2, "bad": None}}


def test_a_workflow_with_a_run_at_and_priorities(r: "redis.Redis", client: Client) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    made = client.enqueue_workflow([Step("a", note("a", priority=5)), Step("b", note("b", run_at=later), after=["a"])])
    [lease] = claim(r, "q2")
    complete(r, "q2", lease.id, lease.token)
    b = client.get(made.job_ids_by_step["b"])
    assert b.state is JobState.SCHEDULED and b.run_at is not None and abs((b.run_at - later).total_seconds()) < 1


def test_a_dependent_of_a_dead_and_a_completed_job_continues_when_the_dead_one_is_resubmitted(
    r: "redis.Redis", client: Client, registry: TaskRegistry
) -> None:
    bad = client.enqueue("w.boom", {"tag": "bad"})
    good = client.enqueue("w.add", {"x": 1})
    run_all(r, registry)
    child = client.enqueue("w.add", {"x": 2}, depends_on=[bad, good])
    assert child.state is JobState.CANCELLED
    r.hset(queue_keys("q").job(bad.id), mapping={"task": "w.add", "params": "{}"})  # fixed, as an operator would
    client.requeue(bad.id)
    assert client.get(child.id).state is JobState.WAITING
    run_all(r, registry)
    assert client.get(child.id).state is JobState.COMPLETED


def test_a_deleted_dependent_leaves_nothing_behind_when_its_parent_ends(r: "redis.Redis", client: Client) -> None:
    a = client.enqueue("w.add", {"x": 1})
    b = client.enqueue("w.add", depends_on=[a])
    client.delete(b.id)
    [lease] = claim(r, "q")
    complete(r, "q", lease.id, lease.token)
    assert r.keys(f"*{b.id}*") == []


def test_a_parent_still_in_the_intake_is_found(r: "redis.Redis", client: Client) -> None:
    a = client.enqueue("w.add", {"x": 1})  # no worker idle: one XADD to the queue's intake
    assert r.xlen(queue_keys("q").intake) == 1
    b = client.enqueue("w.add", depends_on=[("q", a.id)])
    assert b.state is JobState.WAITING and r.xlen(queue_keys("q").intake) == 0
