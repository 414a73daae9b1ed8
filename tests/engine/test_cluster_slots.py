"""Every Lua script runs in one Redis Cluster slot: the keys store.py passes to each script hash to one slot
(no server needed: the calls are recorded, not sent), and cluster URLs parse as documented."""

from typing import Any

import pytest
import redis
from redis.crc import key_slot

from jobconsole.core import cluster, scripts
from jobconsole.core.replace import ReplaceArgs
from jobconsole.core.states import JobState
from jobconsole.core.store import Call, Store, WorkerIdentity, group_script_keys


class _Sent(Exception):
    pass


class Recorder(Store):
    """A Store whose calls are recorded instead of run."""

    def __init__(self, *, as_cluster: bool) -> None:
        super().__init__(redis.Redis(port=1))  # never connected: nothing is sent
        self.cluster = as_cluster
        self.calls: list[Call[Any]] = []

    def run(self, call: Call[Any], *, spin_s: float = 0.0) -> Any:
        self.calls.append(call)
        raise _Sent

    def run_many(self, calls: Any) -> list[Any]:
        self.calls.extend(calls)
        raise _Sent


def _record(store: Recorder, make: Any) -> None:
    try:
        result = make()
    except _Sent:
        return
    if isinstance(result, Call):
        store.calls.append(result)


def every_call(store: Recorder) -> list[Call[Any]]:
    q, g = "emails", "smtp"
    w = WorkerIdentity("w-1", "host", 1)
    job = ["id", "t", 0, "", "", "", 3, "queue", q, "params", "{}", "max_retries", 3]
    makers = [
        lambda: store.enqueue_call(q, 1, True, job),
        lambda: store.enqueue_one_call(q, "id", ["task", "t", "priority", 0]),
        lambda: store.drain_call(q),
        lambda: store.cancel_call(q, "id", ttl_ms=1),
        lambda: store.requeue_call(q, "id", reset_attempts=False),
        lambda: store.delete_call(q, "id"),
        lambda: store.delete_unique(q, "key"),
        lambda: store.resubmit_call(q, [("id", None, None)], stamp="s", reset_attempts=False),
        lambda: store.edit_call(q, "id", expected_state="queued", priority=1),
        lambda: store.set_paused(q, True),
        lambda: store.claim_call(q, w, 5, idle_ms=1000),
        lambda: store.group_acquire(g, 1, holder="w", lease_ms=1000, queue=q),
        lambda: store.group_release_call(g, ["t"], unused=False),
        lambda: store.group_renew_call(g, ["t"], lease_ms=1000),
        lambda: Call("group_touch", group_script_keys("group_touch", g), [], int),  # touch_groups' call
        lambda: store.claim_group_call(q, g, w, 1),
        lambda: store.complete_call(q, [("id", "tok", "null", 1)], ttl_ms=1),
        lambda: store.fail_call(
            q, "id", "tok", outcome="error", retry=True, delay_ms=1, error={}, runtime_ms=1, ttl_ms=1
        ),
        lambda: store.release_call(q, "id", "tok", "r"),
        lambda: store.replace_call(q, "id", "tok", ReplaceArgs("", "", "", ""), "null", ttl_ms=1),
        lambda: store.heartbeat_call(q, [("id", "tok", "", "")]),
        lambda: store.release_orphans(q, w, []),
        lambda: store.announce([q, "other"], {"t": "{}"}),
        lambda: store.register_worker("w-1", ttl_s=10, now_ms=1, info={"host": "h"}),
        lambda: store.control_worker_call("w-1", "quiet"),
        lambda: store.acquire_lock("maintenance", "tok", 1000),
        lambda: store.recover(q, limit=1, outage_ms=0, ttl_ms=1),
        lambda: store.worker_beat("w-1", expiry_ms=3000),
        lambda: store.lapse_workers(limit=1, keep_ms=1, keep=1, silence_ms=1, spare_ms=1, stale_ms=1),
        lambda: store.take_back_call(q, "w-1", last_beat_ms=1, ttl_ms=1),
        lambda: store.promote(q, limit=1),
        *(lambda s=s: store.trim(q, s, age_ms=1, limit=1) for s in (JobState.COMPLETED, JobState.DEAD)),
        lambda: store.gauges_call(q, grace_ms=0),
        lambda: store.periodic_advance("p", expected_ms=None, new_ms=1, job_id="id", slot_ms=1),
        lambda: store.mirror_read([q, "other", "third"], group="g", consumer="c", count=1, pending=False),
        lambda: store.mirror_group(q, group="g", start="0", recreate=False),
        lambda: store.mirror_epoch(),
        lambda: store.workflow_call(q, "wf", name="n", keep_ms=1, count=0, blocks=[]),
        lambda: store.workflow_cancel(q, "wf", ttl_ms=1),
        lambda: store.workflow_restore_call(q, "wf", ["n", q, 0, 0, "", 0, 0, 0, 0]),
        lambda: store.workflow_cancel(q, "wf", ttl_ms=1, mode="part", job_ids=["id"]),
        lambda: store.workflow_part_call(q, "wf", home="other", count=0, blocks=[], remote_parents=["other|p"],
                                         remote_links=[("id", "other|c")]),
        *(lambda op=op: store.workflow_parts(op, q, "wf") for op in ("begin", "commit", "open", "unplace")),
        *(lambda op=op: store.relay_call(op, q) for op in ("due", "apply", "ack")),
    ]  # fmt: skip
    for make in makers:
        _record(store, make)
    return store.calls


def test_every_script_keeps_to_one_slot_in_a_cluster() -> None:
    calls = every_call(Recorder(as_cluster=True))
    assert {c.script for c in calls} == set(scripts.names()), "a script without a call here: add one"
    for call in calls:
        declared = scripts.load(call.script).keys
        assert call.keys, call.script
        slots = {key_slot(k.encode()) for k in call.keys}
        assert len(slots) == 1, f"lua/{call.script}.lua's keys span slots {sorted(slots)}: {list(call.keys)}"
        if "..." not in " ".join(declared) and "drain" not in declared and "sets" not in declared:
            assert len(call.keys) == len(declared), call.script


def test_only_the_mirror_read_spans_slots_on_one_node() -> None:
    """Outside a cluster the mirror reads every stream in one script: the one call that spans slots."""
    spanning = {
        c.script for c in every_call(Recorder(as_cluster=False)) if len({key_slot(k.encode()) for k in c.keys}) > 1
    }
    assert spanning == {"mirror_read"}


def test_different_queues_land_in_different_slots() -> None:
    slots = {key_slot(f"jc:{{q:q{i}}}:ready".encode()) for i in range(50)}
    assert len(slots) == 50


def test_cluster_urls() -> None:
    target = cluster.parse_url("redis+cluster://u:p%40ss@10.0.0.1:7000,[::1]:7001")
    assert target.nodes == (("10.0.0.1", 7000), ("::1", 7001))
    assert (target.username, target.password, target.ssl) == ("u", "p@ss", False)
    assert cluster.parse_url("rediss+cluster://h:1/?password=x").password == "x"
    assert cluster.parse_url("rediss+cluster://h:1").ssl
    assert cluster.is_cluster_url("redis+cluster://h:1") and not cluster.is_cluster_url("redis://h:1")
    for bad in ["redis+cluster://h", "redis+cluster://h:1/3", "redis+cluster://h:1?db=2", "redis://h:1"]:
        with pytest.raises(ValueError):
            cluster.parse_url(bad)


def test_commands_are_routed_by_their_key() -> None:
    assert cluster.command_key(["EVALSHA", "abc", 2, "jc:{q:a}:ready", "jc:{q:a}:x", "arg"]) == "jc:{q:a}:ready"
    assert cluster.command_key(["HGETALL", "jc:{q:a}:job:1"]) == "jc:{q:a}:job:1"
    assert cluster.command_key(["WAIT", 1, 100]) is None
