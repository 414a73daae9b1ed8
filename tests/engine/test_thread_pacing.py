"""How many task threads take jobs: fewer while short tasks keep the GIL busy, all of them again as soon
as jobs wait behind slow tasks (core/thread_pacing.py)."""

import threading
import time

import pytest
import redis

from jobconsole.core import Client, JobSpec, TaskRegistry, thread_pacing
from jobconsole.core.thread_pacing import MIN_ACTIVE, PACE_EVERY_S, STARVED_AFTER_S, ThreadPacer, threads_cpu_clock
from tests.helpers import wait_for, worker_in_thread


class FakeCpu:
    """A process CPU clock the test advances by hand."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self) -> float:
        return self.seconds


def look(pacer: ThreadPacer, cpu: FakeCpu, now: float, share: float, **kw: int | bool) -> float:
    """Advance one pacing interval during which the process used `share` of a core; returns the new now."""
    interval = PACE_EVERY_S * 1.01  # a little over, whatever the float rounding
    now += interval
    cpu.seconds += share * interval
    pacer.look(now, backlog=int(kw.get("backlog", 1)), short_tasks=bool(kw.get("short_tasks", True)))
    return now


def paced_down(limit: int) -> tuple[ThreadPacer, FakeCpu, float]:
    """A pacer whose process kept a whole core busy for as many looks as it takes to reach its floor."""
    cpu = FakeCpu()
    pacer = ThreadPacer(limit, cpu_clock=cpu)
    now = time.monotonic()
    for _ in range(limit):
        now = look(pacer, cpu, now, 0.99)
    return pacer, cpu, now


def test_a_busy_process_shrinks_one_thread_a_look_down_to_the_floor() -> None:
    cpu = FakeCpu()
    pacer = ThreadPacer(10, cpu_clock=cpu)
    now = time.monotonic()
    seen = []
    for _ in range(12):
        now = look(pacer, cpu, now, 0.97)
        seen.append(pacer.active)
    assert seen[:7] == [9, 8, 7, 6, 5, 4, 3]
    assert seen[-1] == MIN_ACTIVE == 3


def test_waiting_jobs_with_cpu_to_spare_double_the_threads_up_to_the_limit() -> None:
    pacer, cpu, now = paced_down(10)
    assert pacer.active == 3
    now = look(pacer, cpu, now, 0.3, backlog=0)
    assert pacer.active == 3  # idle threads to spare but nothing waits: no reason to wake more
    now = look(pacer, cpu, now, 0.7)
    assert pacer.active == 3  # between the bounds: stay
    now = look(pacer, cpu, now, 0.3)
    assert pacer.active == 6
    now = look(pacer, cpu, now, 0.3)
    assert pacer.active == 10


def test_tasks_that_are_not_short_get_every_thread() -> None:
    pacer, cpu, now = paced_down(8)
    assert pacer.active == 3
    look(pacer, cpu, now, 0.99, short_tasks=False)
    assert pacer.active == 8


def test_starvation_adds_a_thread_at_once_but_at_most_one_per_interval() -> None:
    pacer, _, now = paced_down(5)
    assert pacer.active == 3
    pacer.outcome_seen(now)
    assert not pacer.starved(now + STARVED_AFTER_S / 2, backlog=4)  # a task finished just now
    assert not pacer.starved(now + STARVED_AFTER_S * 2, backlog=0)  # nothing waits
    assert pacer.starved(now + STARVED_AFTER_S * 2, backlog=4)
    assert pacer.active == 4
    assert not pacer.starved(now + STARVED_AFTER_S * 2.5, backlog=4)
    assert pacer.starved(now + STARVED_AFTER_S * 3.5, backlog=4)
    assert pacer.active == 5
    assert not pacer.starved(now + STARVED_AFTER_S * 10, backlog=4)  # the limit is the limit


def test_a_small_concurrency_is_never_paced_below_itself() -> None:
    pacer, _, _ = paced_down(2)
    assert pacer.active == 2


def test_a_worker_paces_down_under_cpu_bound_short_tasks_and_opens_up_for_slow_ones(
    r: "redis.Redis", monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's wiring of the pacer (its policy is tested above). While the tasks spin, the thresholds are
    lowered: on a machine shared with other tests the spinning threads get a third of a core, not the 85 % that
    means GIL-bound."""
    monkeypatch.setattr(thread_pacing, "SHRINK_ABOVE_CPU", 0.3)
    monkeypatch.setattr(thread_pacing, "GROW_BELOW_CPU", 0.1)
    registry = TaskRegistry()
    lock = threading.Lock()
    sleepers = {"now": 0, "most": 0}

    @registry.task(name="t.spin", queue="q")
    def spin() -> None:
        deadline = time.perf_counter() + 0.002
        while time.perf_counter() < deadline:
            pass

    @registry.task(name="t.sleepy", queue="q")
    def sleepy() -> None:
        with lock:
            sleepers["now"] += 1
            sleepers["most"] = max(sleepers["most"], sleepers["now"])
        time.sleep(0.3)
        with lock:
            sleepers["now"] -= 1

    client = Client(r, registry)
    client.enqueue_many([JobSpec(task="t.spin")] * 3000)
    with worker_in_thread(r, registry, ["q"], concurrency=10) as worker:
        # CPU-bound 2 ms tasks: the GIL is the limit, so the worker lets fewer threads take jobs.
        wait_for(lambda: worker._threads.active == MIN_ACTIVE, timeout=15)
        monkeypatch.undo()  # the shipped thresholds again: a lowered one would shrink while the spin jobs finish
        # Slow jobs ahead of the rest: they wait behind the few active threads until the worker sees it.
        client.enqueue_many([JobSpec(task="t.sleepy", priority="high")] * 10)
        wait_for(lambda: sleepers["most"] == 10, timeout=15)
        assert worker._threads.active == 10


def burn_cpu(until: threading.Event) -> None:
    while not until.is_set():
        sum(range(1000))


def test_the_pipeline_clock_counts_only_the_threads_it_is_given() -> None:
    stop = threading.Event()
    burner = threading.Thread(target=burn_cpu, args=(stop,))
    sleeper = threading.Thread(target=stop.wait)
    burner.start()
    sleeper.start()
    try:
        only_sleeper = threads_cpu_clock(lambda: [sleeper.ident, None])
        only_burner = threads_cpu_clock(lambda: [burner.ident])
        a, b = only_sleeper(), only_burner()
        # The burner's CPU grows as fast as the machine lets it (others may share the cores); the sleeper's not at all.
        wait_for(lambda: only_burner() - b > 0.1, timeout=10)
        assert only_sleeper() - a < 0.02
    finally:
        stop.set()
        burner.join()
        sleeper.join()


def test_a_busy_thread_outside_the_job_pipeline_does_not_shrink_it(r: "redis.Redis") -> None:
    """Like a mirror thread sharing the worker's process: its CPU is not the tasks' and must not cost
    I/O-bound tasks their threads."""
    registry = TaskRegistry()

    @registry.task(name="t.io", queue="q")
    def io() -> None:
        time.sleep(0.005)

    Client(r, registry).enqueue_many([JobSpec(task="t.io")] * 1500)
    stop = threading.Event()
    burner = threading.Thread(target=burn_cpu, args=(stop,))
    burner.start()
    try:
        with worker_in_thread(r, registry, ["q"], concurrency=10) as worker:
            fewest = 10
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                fewest = min(fewest, worker._threads.active)
                time.sleep(0.01)
            assert worker.processed > 100  # it was working all along
        assert fewest == 10
    finally:
        stop.set()
        burner.join()
