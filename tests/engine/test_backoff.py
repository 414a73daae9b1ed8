import random

import pytest

from jobconsole.core.backoff import Backoff, retry_delay


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        (Backoff.CONSTANT, [2, 2, 2, 2, 2]),
        (Backoff.LINEAR, [2, 4, 6, 8, 10]),
        (Backoff.EXPONENTIAL, [2, 4, 8, 16, 20]),  # capped at 20
    ],
)
def test_deterministic_strategies(strategy: Backoff, expected: list[float]) -> None:
    assert [retry_delay(strategy, 2.0, n, cap=20.0) for n in range(1, 6)] == expected


def test_exponential_jitter_stays_within_half_and_full_backoff() -> None:
    rng = random.Random(7)
    for attempt in range(1, 12):
        full = min(2.0 * 2 ** (attempt - 1), 100.0)
        samples = [retry_delay(Backoff.EXPONENTIAL_JITTER, 2.0, attempt, cap=100.0, rng=rng) for _ in range(200)]
        assert all(full / 2 <= s <= full for s in samples)
        assert max(samples) - min(samples) > full / 10  # it really is spread


def test_huge_attempt_numbers_do_not_overflow() -> None:
    assert retry_delay(Backoff.EXPONENTIAL, 1.0, 10_000, cap=3600.0) == 3600.0


def test_runqueues_backoff_names_map_onto_ours() -> None:
    from jobconsole.core.backoff import YEAR_S, Backoff

    assert Backoff.parse("standard") is Backoff.EXPONENTIAL
    assert Backoff.parse("immeadiate") is Backoff.IMMEDIATE and Backoff.parse("Immediate") is Backoff.IMMEDIATE
    assert Backoff.parse("year") is Backoff.YEAR
    assert retry_delay(Backoff.IMMEDIATE, 5.0, 3, 3600.0) == 0.0
    assert retry_delay(Backoff.YEAR, 5.0, 1, 3600.0) == YEAR_S  # past the cap: the job is parked
    with pytest.raises(ValueError, match="unknown backoff strategy 'fortnightly'; known: constant"):
        Backoff.parse("fortnightly")


def test_a_task_registered_with_a_runqueue_name_retries_by_it() -> None:
    from jobconsole.core import TaskRegistry
    from jobconsole.core.backoff import Backoff

    registry = TaskRegistry()
    task = registry.register(lambda: None, name="rq.task", backoff_strategy="standard", retry_delay=2.0)
    assert task.backoff_strategy is Backoff.EXPONENTIAL and task.next_retry_delay(3) == 8.0
    assert registry.register(lambda: None, name="rq.now", backoff_strategy="immediate").next_retry_delay(1) == 0.0
