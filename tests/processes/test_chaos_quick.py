"""The chaos suite's quick version (the full one is `make chaos`): every scenario of chaos/scenarios.py at
small volume, two at a time, each against its own redis-server and worker processes. Also checks that the
checker itself catches what it claims to catch, on made-up histories."""

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from chaos.checker import FLAKY_ERROR, Report, history_defects, judge, leftovers
from chaos.ledger import Accepted, Duplicate, Execution, Fault
from chaos.run import GATES, Result, print_result, run_scenario
from chaos.scenarios import GARBLED_PARAMS, REDIS_FULL_GATES, SCENARIOS, garbled_dead_at_once
from chaos.tasks import QUEUE
from jobconsole.core import Client, Job, TaskRegistry
from jobconsole.core.keys import queue_keys

SEED = 1
LANES = 2  # scenarios run side by side: they mostly wait for leases to expire


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Result | BaseException]]:
    root = tmp_path_factory.mktemp("chaos")

    def run(name: str) -> Result | BaseException:
        try:
            return run_scenario(SCENARIOS[name], quick=True, seed=SEED, root=root)
        except BaseException as exc:  # noqa: BLE001 - reported by that scenario's test
            return exc

    with ThreadPoolExecutor(LANES) as pool:
        yield dict(zip(SCENARIOS, pool.map(run, SCENARIOS), strict=True))


@pytest.mark.slow
# The first test's setup runs every quick scenario (the module fixture): its time, not one test's, is the bound.
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_quick_scenario(name: str, quick_results: dict[str, Result | BaseException]) -> None:
    result = quick_results[name]
    if isinstance(result, BaseException):
        raise result
    print_result(result)  # shown by pytest on failure
    rep = result.report
    assert rep.accepted > 0 and rep.executions >= rep.accepted - rep.lost
    assert {gate: getattr(rep, gate) for gate in GATES} == dict.fromkeys(GATES, 0), rep.notes
    assert result.passed, (result.failures, rep.notes)  # also the scenario's own gates


def test_a_scenario_fails_on_its_own_gates_among_its_tallies() -> None:
    scenario = SCENARIOS["redis_full"]
    tallies = {"refusals": 40} | {gate: 0 for gate in REDIS_FULL_GATES if gate != "never_accepted"}  # a Report field
    assert Result(scenario, Report(accepted=9), 1.0, tallies).passed
    assert Result(scenario, Report(accepted=9), 1.0, tallies | {"refused_left_trace": 2}).failures == [
        "refused_left_trace=2"
    ]
    assert Result(scenario, Report(accepted=9, never_accepted=1), 1.0, tallies).failures == ["never_accepted=1"]
    assert Result(SCENARIOS["kill_loop"], Report(accepted=9, never_accepted=1), 1.0).passed  # not gated there


# --- the checker on made-up data ---------------------------------------------------------------------


def job(job_id: str, state: str, *attempts: tuple[str, int, int, float, float, str], task: str = "chaos.work") -> Job:
    """A job as read from Redis; attempts are (worker, attempt, pid, started, ended, outcome) in seconds."""
    history = [
        json.dumps({"worker": w, "attempt": n, "pid": pid, "started_at": int(s * 1000), "ended_at": int(e * 1000),
                    "outcome": outcome})
        for w, n, pid, s, e, outcome in attempts
    ]  # fmt: skip
    return Job.from_hash({"id": job_id, "task": task, "state": state, "attempts": str(len(attempts))}, history)


def run(job_id: str, worker: str, attempt: int, pid: int, started: float, ended: float | None) -> Execution:
    return Execution(job_id, attempt, f"{worker}:1", worker, pid, started, ended, "ok" if ended else None)


def accepted(*ids: str) -> list[Accepted]:
    return [Accepted(i, "chaos.work", "completed", 0.0) for i in ids]


def test_checker_does_not_count_a_zombie_whose_lease_was_taken_away() -> None:
    # w1 froze at 100 s; its lease was recovered at 103 s; it woke and ran on until 106 s (its ack refused).
    jobs = {"a": job("a", "completed", ("w1", 1, 1, 100, 103, "worker_lost"), ("w2", 2, 2, 103.1, 104, "completed"))}
    runs = [run("a", "w1", 1, 1, 100.0, 106.0), run("a", "w2", 2, 2, 103.2, 103.9)]
    report = judge(accepted("a"), runs, [Fault("stop", frozenset({1}), 100.5, 103.5)], jobs)
    assert (report.overlaps, report.wallclock_overlaps, report.lost, report.live_worker_leases_lost) == (0, 1, 0, 0)
    assert report.recovery == [pytest.approx(2.5)]  # stopped at 100.5, lease taken away at 103


def test_checker_counts_two_executions_under_overlapping_leases() -> None:
    # A broken engine that handed out a second lease while the first was still valid.
    jobs = {"a": job("a", "completed", ("w1", 1, 1, 100, 105, "completed"), ("w2", 2, 2, 102, 104, "completed"))}
    runs = [run("a", "w1", 1, 1, 100.0, 104.9), run("a", "w2", 2, 2, 102.1, 103.9)]
    report = judge(accepted("a"), runs, [], jobs)
    assert report.overlaps == 1
    assert report.rerun_after_ack == 0


def test_checker_counts_lost_jobs_reruns_after_ack_early_runs_and_spurious_recoveries() -> None:
    jobs = {
        "done": job("done", "completed", ("w1", 1, 1, 100, 101, "completed"), ("w2", 2, 2, 102, 103, "worker_lost")),
        "stuck": job("stuck", "queued"),
        "fake": job("fake", "completed", ("w1", 1, 1, 100, 101, "completed")),  # completed, but never ran
        "gone": None,
    }
    runs = [run("done", "w1", 1, 1, 100.1, 100.9), run("done", "w2", 2, 2, 102.1, None)]
    late = [Accepted("done", "chaos.work", "completed", 101.0), *accepted("stuck", "fake", "gone")]
    report = judge(late, runs, [], jobs)
    assert report.lost == 3
    assert report.rerun_after_ack == 1
    assert report.early == 1  # 'done' ran at 100.1, before its run_at (101)
    assert report.live_worker_leases_lost == 1  # w2 (pid 2) was never hit by a fault


def test_checker_sets_apart_jobs_redis_forgot_in_its_everysec_window() -> None:
    # redis-server (appendfsync everysec) was killed at 200 s: a job accepted at 199 s may be gone with the
    # AOF tail Redis had not written yet; one accepted at 150 s, or one Redis still holds, may not.
    jobs = {"recent": None, "old": None, "stuck": job("stuck", "queued")}
    acc = [
        Accepted(i, "chaos.work", "completed", 0.0, at)
        for i, at in [("recent", 199.0), ("old", 150.0), ("stuck", 199.5)]
    ]
    kill = [Fault("redis_kill", frozenset(), 200.0, 200.5)]
    everysec = judge(acc, [], kill, jobs, everysec=True)
    assert (everysec.lost, everysec.lost_in_fsync_window) == (2, 1)
    always = judge(acc, [], kill, jobs)
    assert (always.lost, always.lost_in_fsync_window) == (3, 0)


def test_checker_sets_apart_what_a_rollback_took_before_the_mirror_saw_it() -> None:
    # Redis was rolled back at 200 s. 'unseen' was accepted at 199 s and never reached the database: no
    # reconciler could know it. 'done' ran and completed; Redis forgot it, the database kept it. 'known' was
    # in the database as queued: the reconciler should have put it back, so its loss counts. 'earlier' was also
    # accepted before the rollback and not in the database: the report says how long before (the mirror's lag).
    # The AOF was copied at 198.5 s: 'copied' was accepted before, so it was in the copy; its loss counts.
    # 'instant' was stamped as Redis was being killed (its reply came first): the rollback took it.
    jobs = {"unseen": None, "done": None, "known": None, "later": None, "earlier": None, "copied": None}
    jobs["instant"] = None
    acc = [
        Accepted(i, "chaos.work", "completed", 0.0, at)
        for i, at in [
            ("unseen", 199.5), ("done", 198.0), ("known", 150.0), ("later", 201.0), ("earlier", 199.0),
            ("copied", 198.4), ("instant", 200.1),
        ]
    ]  # fmt: skip
    rollback = [Fault("aof_copy", frozenset(), 198.5, 198.5), Fault("power_loss", frozenset({7}), 200.0, 200.5)]
    mirrored = {"done": "completed", "known": "queued"}
    report = judge(acc, [run("done", "w1", 1, 1, 198.1, 198.2)], rollback, jobs, mirrored=mirrored)
    assert (report.lost_in_rollback, report.finished_in_mirror_only, report.lost) == (3, 1, 3)  # known, later, copied
    assert report.rollback_loss_age == 1.0
    assert report.recovery == [] and "job copied was accepted before the AOF copy and is gone" in report.notes
    without_mirror = judge(acc, [run("done", "w1", 1, 1, 198.1, 198.2)], rollback, jobs)
    assert (without_mirror.lost_in_rollback, without_mirror.lost, without_mirror.rollback_loss_age) == (0, 7, None)


def test_checker_charges_a_graceful_shutdown_only_when_redis_was_reachable() -> None:
    # Worker pid 1 got SIGTERM at 100 s; its on_shutdown=requeue job's lease still expired (worker_lost).
    def requeue_job() -> Job:
        attempts = [("w1", 1, 1, 99, 102, "worker_lost"), ("w2", 2, 2, 102.5, 103, "completed")]
        return job("a", "completed", *attempts, task="chaos.requeue")

    acc = [Accepted("a", "chaos.requeue", "completed", 0.0)]
    runs = [run("a", "w1", 1, 1, 99.1, None), run("a", "w2", 2, 2, 102.6, 102.9)]
    term = Fault("term", frozenset({1}), 100.0, 100.0)
    alone = judge(acc, runs, [term], {"a": requeue_job()})
    assert alone.shutdown_attempts_used == 1  # nothing kept it from giving the job back
    cut = Fault("blackhole", frozenset(), 99.5, 102.5)
    assert judge(acc, runs, [term, cut], {"a": requeue_job()}).shutdown_attempts_used == 0
    earlier = Fault("redis_kill", frozenset(), 99.2, 99.8)  # over before the SIGTERM, but during the lease
    assert judge(acc, runs, [term, earlier], {"a": requeue_job()}).shutdown_attempts_used == 0
    later = Fault("term", frozenset({1}), 110.0, 110.0)  # its lease was lost before, to some other fault
    assert judge(acc, runs, [later], {"a": requeue_job()}).shutdown_attempts_used == 0


def test_checker_counts_an_execution_that_no_lease_explains() -> None:
    jobs = {"a": job("a", "completed", ("w1", 1, 1, 100, 101, "completed"))}
    report = judge(accepted("a"), [run("a", "w1", 1, 1, 100.1, 100.9), run("a", "w9", 1, 9, 100.2, 100.5)], [], jobs)
    assert report.unmatched == 1
    assert report.overlaps == 1  # an unexplained execution counts as valid throughout


def test_checker_counts_two_live_jobs_under_one_unique_key_and_duplicates_of_a_finished_holder() -> None:
    def keyed(job_id: str, state: str, enqueued: float, finished: float | None) -> Job:
        h = {"id": job_id, "task": "chaos.work", "state": state, "unique_key": "k"}
        h["enqueued_at"] = str(int(enqueued * 1000))
        return Job.from_hash(h | ({"finished_at": str(int(finished * 1000))} if finished else {}), [])

    # 'a' held k from 100 s to 101 s, 'b' from 101 s (the moment a's completion freed it) to 102 s.
    jobs = {"a": keyed("a", "completed", 100, 101), "b": keyed("b", "completed", 101, 102)}
    acc = [Accepted(i, "chaos.work", "completed", 0.0, unique_key="k") for i in jobs]
    in_turn = [Duplicate("x", "k", "a", 100.5), Duplicate("y", "k", "b", 100.9)]  # b was sent for before a ended
    report = judge(acc, [], [], jobs, duplicates=in_turn)
    assert (report.unique_jobs, report.unique_duplicates, report.unique_overlaps, report.unique_refused_wrongly) == (
        2, 2, 0, 0,
    )  # fmt: skip
    # A broken engine: 'c' got k while 'b' still held it; 'b' still running holds it to the end.
    jobs |= {"b": keyed("b", "running", 101, None), "c": keyed("c", "completed", 101.5, 101.8)}
    acc.append(Accepted("c", "chaos.work", "completed", 0.0, unique_key="k"))
    assert judge(acc, [], [], jobs).unique_overlaps == 1  # b with c
    # Refused for 'a' after a had finished (its key leaked), for a job of another key, for a job never accepted.
    wrong = [Duplicate("x", "k", "a", 101.5), Duplicate("y", "j", "a", 100.5), Duplicate("z", "k", "?", 100.5)]
    report = judge(acc, [], [], jobs, duplicates=wrong)
    assert report.unique_refused_wrongly == 3


def test_a_garbled_job_may_lose_a_lease_only_to_a_poison_jobs_crash() -> None:
    def garbled(state: str, *attempts: tuple[str, float, float, str, str]) -> Job:
        history = [
            json.dumps({"worker": w, "attempt": n, "pid": 1, "started_at": int(s * 1000), "ended_at": int(e * 1000),
                        "outcome": outcome, "error_class": error})
            for n, (w, s, e, outcome, error) in enumerate(attempts, 1)
        ]  # fmt: skip
        h = {"id": "g", "task": "chaos.work", "state": state, "attempts": str(len(attempts)), "params": GARBLED_PARAMS}
        return Job.from_hash(h, history)

    undecodable = "jobconsole.core.errors.UndecodablePayload"
    at_once = garbled("dead", ("w1", 100, 100.1, "failed", undecodable))
    assert garbled_dead_at_once(at_once, [])
    # Seed 15005: w0-6 claimed it with a poison job that crashed the worker 2 ms later, before its failure was sent.
    crashed = garbled("dead", ("w1", 100, 101.2, "worker_lost", ""), ("w2", 101.3, 101.4, "failed", undecodable))
    assert garbled_dead_at_once(crashed, [("w1", 100.002)])
    assert not garbled_dead_at_once(crashed, [])  # no poison crash explains the lost worker: the garbled job did it
    assert not garbled_dead_at_once(crashed, [("w2", 100.002)])  # another worker's crash
    # The poison run's gate came before the garbled job's claim; the process died after it (CI, 2026-12-07).
    assert garbled_dead_at_once(crashed, [("w1", 99.0)])
    assert not garbled_dead_at_once(crashed, [("w1", 101.5)])  # after the lease ended: w1 lost it alive
    retried = garbled("dead", ("w1", 100, 100.1, "failed", undecodable), ("w2", 101, 101.1, "failed", undecodable))
    assert not garbled_dead_at_once(retried, [])  # read and failed twice
    assert not garbled_dead_at_once(garbled("retrying", ("w1", 100, 100.1, "failed", undecodable)), [])


def test_leftovers_are_what_no_job_accounts_for(r: "redis.Redis") -> None:
    registry = TaskRegistry()
    registry.task(name="x", queue=QUEUE)(lambda: None)
    client = Client(r, registry)
    queued = client.enqueue("x").id
    held = client.enqueue("x", unique_key="u").id
    client.enqueue("x", delay=60)
    assert leftovers(r) == []  # a consistent queue
    k = queue_keys(QUEUE)
    r.zrem(k.ready, queued)  # a job its state's set forgot
    r.zadd(k.ready, {"ghost": 1})  # a member without a job
    r.rpush(k.attempts("gone"), "{}")  # a history without a job
    r.hset(k.job(held), "state", "completed")  # still in ready, and holding its unique key
    found = leftovers(r)
    assert len(found) == 5, found
    assert any(queued in f and "no set" in f for f in found)
    assert any("ghost" in f for f in found) and any("gone" in f for f in found)
    assert any(held in f and "'completed'" in f for f in found) and any("unique key 'u'" in f for f in found)


def flaky_job(fail_first: int, *attempts: tuple[int, float, float, str], error: str = FLAKY_ERROR) -> Job:
    """A completed chaos.flaky job; attempts are (number, started, ended, outcome), all by worker w1."""
    failed = {"error_class": error, "traceback": "...\nchaos.tasks.FlakyError: planned failure 1 of 2\n",
              "top_frame": "/src/chaos/tasks.py:131 in flaky"}  # fmt: skip
    history = [
        json.dumps({"worker": "w1", "attempt": n, "pid": 1, "started_at": int(s * 1000), "ended_at": int(e * 1000),
                    "outcome": outcome, **(failed if outcome == "failed" else {})})
        for n, s, e, outcome in attempts
    ]  # fmt: skip
    counted = sum(1 for *_, outcome in attempts if outcome != "requeued")  # a given-back attempt does not count
    h = {"id": "f", "task": "chaos.flaky", "state": "completed", "attempts": str(counted),
         "params": json.dumps({"key": "f", "fail_first": fail_first})}  # fmt: skip
    return Job.from_hash(h, history)


def failing_runs(*numbers: int) -> list[Execution]:
    return [Execution("f", n, "t", "w1", 1, float(n), float(n), "FlakyError") for n in numbers]


def test_history_check_passes_a_whole_history_and_names_each_kind_of_defect() -> None:
    # Backoff after attempt 1: 0.1 s at most, so never under 0.05 s; after attempt 2: at least 0.1 s.
    good = flaky_job(2, (1, 10.0, 10.01, "failed"), (2, 10.07, 10.08, "failed"), (3, 10.3, 10.4, "worker_lost"),
                     (4, 11.5, 11.6, "completed"))  # fmt: skip
    assert history_defects(good, failing_runs(1, 2)) == []
    # A graceful shutdown gave attempt 2 back without counting it: it runs again as attempt 2.
    given_back = flaky_job(1, (1, 10.0, 10.01, "failed"), (2, 10.1, 10.2, "requeued"), (2, 10.3, 10.4, "completed"))
    assert history_defects(given_back, failing_runs(1)) == []
    cases = {
        "attempt numbers": flaky_job(1, (1, 10.0, 10.01, "failed"), (3, 10.2, 10.3, "completed")),
        "not exactly one completed": flaky_job(0, (1, 10.0, 10.1, "completed"), (2, 10.2, 10.3, "worker_lost")),
        "began before attempt 1 ended": flaky_job(0, (1, 10.0, 10.5, "worker_lost"), (2, 10.4, 10.6, "completed")),
        "only the first 1 should": flaky_job(
            1, (1, 10.0, 10.01, "failed"), (2, 10.1, 10.11, "failed"), (3, 10.5, 10.6, "completed")
        ),
        "backoff >= 0.05s": flaky_job(1, (1, 10.0, 10.01, "failed"), (2, 10.03, 10.1, "completed")),
        "the first 2 fail": flaky_job(2, (1, 10.0, 10.01, "failed"), (2, 10.1, 10.2, "completed")),
        "unexpected outcome 'timeout'": flaky_job(0, (1, 10.0, 10.1, "timeout"), (2, 10.5, 10.6, "completed")),
        "given back but not run again": flaky_job(0, (1, 10.0, 10.1, "requeued"), (3, 10.5, 10.6, "completed")),
    }
    for expected, flawed in cases.items():
        defects = history_defects(flawed, failing_runs(1, 2))
        assert any(expected in d for d in defects), (expected, defects)
    wrong_class = flaky_job(1, (1, 10.0, 10.01, "failed"), (2, 10.1, 10.2, "completed"), error="ValueError")
    assert any("error class" in d for d in history_defects(wrong_class, failing_runs(1)))
    assert any("without a failing run" in d for d in history_defects(good, failing_runs(1)))
    backwards = [*failing_runs(1, 2), Execution("f", 1, "t", "w1", 1, 12.0, 12.1, "ok")]
    assert any("lower attempt" in d for d in history_defects(good, backwards))
    report = judge(accepted("f"), [*failing_runs(1, 2), Execution("f", 4, "t", "w1", 1, 11.5, 11.6, "ok")], [],
                   {"f": flaky_job(2, (1, 10.0, 10.01, "failed"), (2, 10.02, 10.08, "failed"),
                                   (3, 10.3, 10.4, "worker_lost"), (4, 11.5, 11.6, "completed"))})  # fmt: skip
    assert (report.histories_checked, report.history_defects) == (1, 1)  # attempt 2 came before its backoff
