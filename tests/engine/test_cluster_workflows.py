"""Workflows whose steps span queues on different Redis Cluster nodes (slots), against a real cluster of three
primaries (tests/cluster_servers.py): created all or nothing, dependents in other slots released through their
parent queue's outbox (lua/_deps.lua, lua/deps_relay.lua) exactly once and never early, also when the relayer or
the creator dies between two slots' steps (maintenance finishes or undoes it), cancelled and resubmitted."""

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
import redis

from jobconsole.core import Client, JobSpec, JobState, TaskRegistry, workflows
from jobconsole.core.compose import chain, chord
from jobconsole.core.connection import connect
from jobconsole.core.keys import queue_keys
from jobconsole.core.maintenance import Maintenance
from jobconsole.core.store import Store
from jobconsole.core.workflows import ARGS_LIST, RUN, InvalidWorkflow, Step
from tests.cluster_servers import ClusterSetup
from tests.conftest import PROJECT
from tests.helpers import claim, complete, run_burst

FAIL_ONCE: set[str] = set()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSetup]:
    setup = ClusterSetup(tmp_path_factory.mktemp("cluster"), replicas=False).start()
    yield setup
    setup.stop()


@pytest.fixture(scope="module")
def queues(cluster: ClusterSetup) -> list[str]:
    """Four queues, the first three on three different primaries."""
    chosen: dict[str, str] = {}
    i = 0
    while len(chosen) < 3:
        chosen.setdefault(cluster.node_of(queue_keys(f"q{i}").ready).name, f"q{i}")
        i += 1
    return [*chosen.values(), f"q{i}"]


@pytest.fixture
def rc(cluster: ClusterSetup) -> Iterator["redis.Redis"]:
    connection = connect(cluster.url)
    connection.flushall()
    FAIL_ONCE.clear()
    yield connection
    connection.close()


@pytest.fixture
def registry() -> TaskRegistry:
    reg = TaskRegistry()

    @reg.task(name="c.add", queue="q0")
    def add(args: list[Any] | None = None, x: int = 0) -> int:
        return x + sum(a if isinstance(a, int) else sum(a) for a in (args or []))

    @reg.task(name="c.flaky", queue="q0", max_retries=0)
    def flaky(tag: str) -> str:
        if tag in FAIL_ONCE:
            FAIL_ONCE.discard(tag)
            raise RuntimeError("failed once")
        return tag

    return reg


def spec(queue: str, x: int = 0, task: str = "c.add", **params: Any) -> JobSpec:
    return JobSpec(task=task, queue=queue, params={"args": [], "x": x} if task == "c.add" else params)


def maintain(rc: "redis.Redis") -> None:
    """One maintenance pass as the leader (it relays the outboxes, finishes or undoes creations), lock released."""
    maintenance = Maintenance(rc)
    try:
        assert maintenance.is_leader()
        maintenance.step()
    finally:
        maintenance.release()


def settle(rc: "redis.Redis", registry: TaskRegistry, queues: list[str], timeout: float = 10) -> None:
    """Run every queue dry, then one maintenance pass, until no message waits to be applied."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run_burst(rc, registry, queues)
        maintain(rc)
        if not any(_pending(rc, q) for q in queues):
            run_burst(rc, registry, queues)
            if not any(_pending(rc, q) for q in queues):
                return
        time.sleep(0.05)  # a message is due 200 ms after its parent's end (lua/_deps.lua)
    raise AssertionError("messages still pending")


def _pending(rc: "redis.Redis", queue: str) -> int:
    """Messages in the queue's outbox not applied yet (not the ones applied once, kept for their second time)."""
    k = queue_keys(queue)
    return cast(int, rc.zcard(k.deps_due)) - cast(int, rc.scard(k.deps_acked))


def released(rc: "redis.Redis", queue: str, job_id: str) -> int:
    """How many times a job was released (its queue's events)."""
    entries = rc.xrange(queue_keys(queue).events, count=100_000)
    return sum(1 for _, e in entries if e.get("job") == job_id and e.get("event") == "released")


def test_a_chain_across_three_nodes_waits_for_the_relay_and_passes_results(
    rc: "redis.Redis", registry: TaskRegistry, queues: list[str]
) -> None:
    client = Client(rc, registry)
    a, b, c = queues[:3]
    made = client.enqueue_workflow(chain(spec(a, 1), spec(b, 10), spec(c, 100)))
    assert made.states_by_step == {"chain.0": JobState.QUEUED, "chain.1": JobState.WAITING,
                                   "chain.2": JobState.WAITING}  # fmt: skip
    run_burst(rc, registry, [a, b, c])
    # The parent completed in its slot; its message to the child's slot waits in its outbox: never early.
    assert client.get(made.job_ids_by_step["chain.0"]).state is JobState.COMPLETED
    assert client.get(made.job_ids_by_step["chain.1"]).state is JobState.WAITING
    assert _pending(rc, a) == 1
    settle(rc, registry, [a, b, c])
    last = client.get(made.job_ids_by_step["chain.2"])
    assert last.state is JobState.COMPLETED and last.result == 111
    for step, queue in (("chain.1", b), ("chain.2", c)):
        assert released(rc, queue, made.job_ids_by_step[step]) == 1
    view = client.queries.workflows.get(made.workflow_id, made.queue)
    assert view is not None and view.counts() == {"completed": 3}
    links = client.queries.workflows.links(made.job_ids_by_step["chain.0"], a)
    assert links.children == [(b, made.job_ids_by_step["chain.1"])]


def test_a_fan_in_across_queues_releases_its_callback_once_after_the_last_member(
    rc: "redis.Redis", registry: TaskRegistry, queues: list[str]
) -> None:
    client = Client(rc, registry)
    members = [spec(queues[i % 3], i) for i in range(30)]
    made = client.enqueue_workflow(chord(members, spec(queues[3]), pass_results=ARGS_LIST))
    body = made.job_ids_by_step["chord.body"]
    run_burst(rc, registry, queues[:3])
    maintain(rc)  # 20 of the 30 parents are in other slots than the body
    settle(rc, registry, queues)
    got = client.get(body)
    assert got.state is JobState.COMPLETED and got.result == sum(range(30))
    assert released(rc, queues[3], body) == 1
    assert rc.hlen(queue_keys(queues[3]).job(body) + ":ended") == 30


def test_a_failure_cancels_dependents_in_other_slots_and_a_resubmit_brings_them_back(
    rc: "redis.Redis", registry: TaskRegistry, queues: list[str]
) -> None:
    client = Client(rc, registry)
    a, b, c, d = queues
    FAIL_ONCE.add("x")
    steps = [
        Step("x", JobSpec(task="c.flaky", queue=a, params={"tag": "x"})),
        Step("y", spec(b), after=["x"]),
        Step("z", spec(c), after=["y"]),  # cancelled in turn, through b's outbox
        Step("anyway", spec(d), after={"x": RUN}),
    ]
    made = client.enqueue_workflow(steps)
    ids = made.job_ids_by_step
    settle(rc, registry, queues)
    assert client.get(ids["x"]).state is JobState.DEAD
    assert client.get(ids["y"]).state is JobState.CANCELLED
    assert client.get(ids["z"]).state is JobState.CANCELLED
    assert client.get(ids["anyway"]).state is JobState.COMPLETED
    client.requeue(ids["x"])  # the dead member runs again: its dependents in other slots wait for it again
    settle(rc, registry, queues)
    for step in ("x", "y", "z"):
        assert client.get(ids[step]).state is JobState.COMPLETED, step
    assert released(rc, d, ids["anyway"]) == 1


def test_a_workflow_across_slots_is_cancelled_everywhere(
    rc: "redis.Redis", registry: TaskRegistry, queues: list[str]
) -> None:
    client = Client(rc, registry)
    a, b, c, d = queues
    steps = [Step("r1", spec(a)), Step("r2", spec(b)), Step("run", spec(c), after={"r1": RUN}),
             Step("after", spec(d), after=["r1", "r2"])]  # fmt: skip
    made = client.enqueue_workflow(steps)
    [lease] = claim(rc, a, 1)  # r1 is running: asked to stop
    assert client.cancel_workflow(made.workflow_id, made.queue) == (3, 1)
    settle(rc, registry, [b, c, d])
    complete(rc, a, lease.id, lease.token)  # it ended anyway: nothing waits for it any more
    settle(rc, registry, queues)
    states = {s: client.get(i).state for s, i in made.job_ids_by_step.items()}
    assert states == {"r1": JobState.COMPLETED, "r2": JobState.CANCELLED, "run": JobState.CANCELLED,
                      "after": JobState.CANCELLED}  # fmt: skip
    view = client.queries.workflows.get(made.workflow_id, made.queue)
    assert view is not None and view.cancelled_at is not None


def _jobs(rc: "redis.Redis") -> int:
    """Job hashes in every queue (not their links, attempts)."""
    found = rc.scan_iter("jc:*job:*", target_nodes="all")  # type: ignore[call-arg]
    return len([k for k in found if ":" not in k.rpartition("job:")[2]])


def test_creation_is_all_or_nothing_across_slots(rc: "redis.Redis", registry: TaskRegistry, queues: list[str]) -> None:
    client = Client(rc, registry)
    a, b = queues[:2]
    with pytest.raises(InvalidWorkflow, match="unknown"):
        client.enqueue_workflow([Step("a", spec(a)), Step("b", JobSpec(task="nope", queue=b), after=["a"])])
    taken = client.enqueue("c.add", {"x": 1}, queue=b)
    client.store.drain(b)  # out of the intake: a job hash
    before = _jobs(rc)
    with pytest.raises(InvalidWorkflow, match="taken"):  # a's part went in, b's was refused: a's is taken out
        client.enqueue_workflow(
            [Step("a", spec(a)), Step("b", JobSpec(task="c.add", queue=b, id=taken.id), after=["a"])]
        )
    assert _jobs(rc) == before
    assert rc.zcard(queue_keys(a).sets["waiting"]) == 0 and rc.zcard(queue_keys(a).ready) == 0


@pytest.mark.parametrize("dies_before", ["commit", "open"])
def test_a_creator_that_dies_midway_is_rolled_back_or_finished_by_maintenance(
    rc: "redis.Redis", registry: TaskRegistry, queues: list[str], monkeypatch: pytest.MonkeyPatch, dies_before: str
) -> None:
    client = Client(rc, registry)
    a, b = queues[:2]
    real = Store.workflow_parts

    def dying(self: Store, op: str, *args: Any) -> Any:
        if op == dies_before:
            raise SystemExit("killed")  # the creator's process ends here: nothing after runs
        return real(self, op, *args)

    monkeypatch.setattr(Store, "workflow_parts", dying)
    with pytest.raises(SystemExit):
        client.enqueue_workflow(chain(spec(a, 1), spec(b, 2), spec(a, 3)), id="01KB0000000000000000000001")
    monkeypatch.setattr(Store, "workflow_parts", real)
    # Placed but not open: nothing is claimable, in either queue.
    assert rc.zcard(queue_keys(a).ready) == 0 and rc.zcard(queue_keys(b).ready) == 0
    assert rc.zcard(queue_keys(a).sets["waiting"]) == 2 and rc.zcard(queue_keys(b).sets["waiting"]) == 1
    maintain(rc)
    assert rc.zcard(queue_keys(a).sets["waiting"]) == 2  # not before its deadline
    monkeypatch.setattr(workflows, "CREATION_DEADLINE_MS", 0)
    rc.zadd(queue_keys(a).wf_creating, {"01KB0000000000000000000001": 0})  # past its deadline
    maintain(rc)
    view = client.queries.workflows.get("01KB0000000000000000000001", a)
    if dies_before == "commit":  # rolled back: no job, no record
        assert _jobs(rc) == 0 and view is None
    else:  # committed: finished, and it runs to its end
        settle(rc, registry, [a, b])
        view = client.queries.workflows.get("01KB0000000000000000000001", a)
        assert view is not None and view.counts() == {"completed": 3}
    assert rc.zcard(queue_keys(a).wf_creating) == 0


def test_a_relayer_that_dies_between_the_two_slots_is_replayed_and_releases_once(
    rc: "redis.Redis", registry: TaskRegistry, queues: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = Client(rc, registry)
    a, b = queues[:2]
    members = [spec(a, i) for i in range(5)]
    made = client.enqueue_workflow(chord(members, spec(b), pass_results=ARGS_LIST))
    body = made.job_ids_by_step["chord.body"]
    run_burst(rc, registry, [a])
    real_run = Store.run

    def dies_after_apply(self: Store, call: Any, **kw: Any) -> Any:
        if call.script == "deps_relay" and call.args[0] == "ack":
            raise SystemExit("killed")  # applied in b's slot, never acknowledged in a's
        return real_run(self, call, **kw)

    monkeypatch.setattr(Store, "run", dies_after_apply)
    with pytest.raises(SystemExit):
        workflows.relay(Store(rc), a, ahead_ms=1000)
    monkeypatch.setattr(Store, "run", real_run)
    assert client.get(body).state is JobState.QUEUED
    assert _pending(rc, a) == 5  # still there, still due
    assert (
        workflows.relay(Store(rc), a, ahead_ms=1000) == 5
    )  # replayed: every edge had ended already, nothing more happens
    assert released(rc, b, body) == 1
    assert rc.hlen(queue_keys(a).deps_out) == 5  # applied once; kept for the grace
    monkeypatch.setattr(workflows, "RELAY_GRACE_MS", 0)
    rc.zadd(queue_keys(a).deps_due, {f: 0 for f in rc.hkeys(queue_keys(a).deps_out)})
    assert workflows.relay(Store(rc), a, ahead_ms=1000) == 5  # the second application, then dropped
    assert rc.exists(queue_keys(a).deps_out, queue_keys(a).deps_due) == 0
    run_burst(rc, registry, [b])
    assert client.get(body).result == sum(range(5)) and released(rc, b, body) == 1


def test_an_older_message_read_late_is_refused(rc: "redis.Redis", registry: TaskRegistry, queues: list[str]) -> None:
    client = Client(rc, registry)
    a, b = queues[:2]
    FAIL_ONCE.add("p")
    made = client.enqueue_workflow(
        [Step("p", JobSpec(task="c.flaky", queue=a, params={"tag": "p"})), Step("k", spec(b), after={"p": RUN})]
    )
    run_burst(rc, registry, [a])  # p is dead: the message 'ended dead' waits in a's outbox
    store = Store(rc)
    stale = store.run(store.relay_call("due", a, 1000, 10))
    client.requeue(made.job_ids_by_step["p"])  # p runs again: its message is now 'revive' (a newer seq)
    workflows.relay(store, a, ahead_ms=1000)
    store.run(store.relay_call("apply", b, *stale))  # a relayer that read the older one applies it late
    assert client.get(made.job_ids_by_step["k"]).state is JobState.WAITING  # not released early
    settle(rc, registry, [a, b])
    assert client.get(made.job_ids_by_step["k"]).state is JobState.COMPLETED
    assert released(rc, b, made.job_ids_by_step["k"]) == 1


def test_a_repeated_call_finishes_a_creation_its_first_caller_left_midway(
    rc: "redis.Redis", registry: TaskRegistry, queues: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = Client(rc, registry)
    a, b = queues[:2]
    real = Store.workflow_parts

    def dying(self: Store, op: str, *args: Any) -> Any:
        if op == "commit":
            raise redis.ConnectionError("lost")  # the first caller's connection broke after the parts went in
        return real(self, op, *args)

    monkeypatch.setattr(Store, "workflow_parts", dying)
    flow = chain(spec(a, 1), spec(b, 2), spec(a, 3))
    with pytest.raises(redis.ConnectionError):
        client.enqueue_workflow(flow, id="01KB0000000000000000000002")
    monkeypatch.setattr(Store, "workflow_parts", real)
    first = {q: rc.zrange(queue_keys(q).sets["waiting"], 0, -1) for q in (a, b)}
    made = client.enqueue_workflow(flow, id="01KB0000000000000000000002")  # sent again: new ids made, old ones used
    assert sorted(made.job_ids_by_step.values()) == sorted(first[a] + first[b])
    assert made.states_by_step["chain.0"] is JobState.QUEUED
    settle(rc, registry, [a, b])
    assert _jobs(rc) == 3 and client.get(made.job_ids_by_step["chain.2"]).result == 6
    assert rc.zcard(queue_keys(a).wf_creating) == 0


DIES_AT = """
import os, signal, sys
from jobconsole.core import Client, JobSpec, TaskRegistry, workflows
from jobconsole.core.compose import chain
from jobconsole.core.connection import connect
from jobconsole.core.store import Store

url, script, op, what, a, b = sys.argv[1:]
real = Store.run

def run(self, call, **kw):
    if call.script == script and call.args[0] == op:
        os.kill(os.getpid(), signal.SIGKILL)  # kill -9 between the two slots' steps
    return real(self, call, **kw)

Store.run = run
rc = connect(url)
if what == "relay":
    workflows.relay(Store(rc), a, ahead_ms=1000)
else:
    registry = TaskRegistry()
    registry.task(name="c.add", queue=a)(lambda args=None, x=0: x)
    specs = [JobSpec(task="c.add", queue=q, params={"args": [], "x": 1}) for q in (a, b, a)]
    Client(rc, registry).enqueue_workflow(chain(*specs), id="01KB0000000000000000000003")
"""


def _killed_at(cluster: ClusterSetup, script: str, op: str, what: str, a: str, b: str) -> None:
    proc = subprocess.run([sys.executable, "-c", DIES_AT, cluster.url, script, op, what, a, b], cwd=PROJECT, timeout=60)
    assert proc.returncode == -signal.SIGKILL


def test_a_relayer_killed_between_the_two_slots_is_recovered_by_maintenance(
    cluster: ClusterSetup, rc: "redis.Redis", registry: TaskRegistry, queues: list[str]
) -> None:
    client = Client(rc, registry)
    a, b = queues[:2]
    made = client.enqueue_workflow(chord([spec(a, i) for i in range(4)], spec(b), pass_results=ARGS_LIST))
    body = made.job_ids_by_step["chord.body"]
    run_burst(rc, registry, [a])
    _killed_at(cluster, "deps_relay", "ack", "relay", a, b)  # applied in b's slot, never acknowledged in a's
    assert client.get(body).state is JobState.QUEUED and _pending(rc, a) == 4
    time.sleep(0.2)  # due by now
    maintain(rc)
    assert _pending(rc, a) == 0 and released(rc, b, body) == 1
    run_burst(rc, registry, [b])
    assert client.get(body).result == sum(range(4)) and released(rc, b, body) == 1


def test_a_creator_killed_before_its_commit_is_rolled_back_by_maintenance(
    cluster: ClusterSetup, rc: "redis.Redis", queues: list[str]
) -> None:
    a, b = queues[:2]
    _killed_at(cluster, "workflow_parts", "commit", "create", a, b)
    assert _jobs(rc) == 3 and rc.zcard(queue_keys(a).ready) + rc.zcard(queue_keys(b).ready) == 0  # none claimable
    rc.zadd(queue_keys(a).wf_creating, {"01KB0000000000000000000003": 0})  # past its deadline
    maintain(rc)
    assert _jobs(rc) == 0 and rc.exists(queue_keys(a).workflow("01KB0000000000000000000003")) == 0
