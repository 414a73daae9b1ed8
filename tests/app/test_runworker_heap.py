"""runworker and runmirror freeze their start-up heap (jobconsole/management/heap.py), so the collector's full
passes skip Django and the apps instead of stalling every job that starts meanwhile."""

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process's objects go back to the collector


def test_a_runworker_runs_its_jobs_with_the_start_up_heap_frozen(
    settings: Any, redis_url: str, db: None, unfrozen: None
) -> None:
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": redis_url}
    assert gc.get_freeze_count() == 0
    call_command("runworker", "--queues", "heapcheck", "--burst", "--no-mirror", "--no-maintenance")
    assert gc.get_freeze_count() > 10_000  # Django, the apps and the registry: tens of thousands of objects


def test_a_runmirror_applies_with_the_start_up_heap_frozen(
    settings: Any, redis_url: str, db: None, unfrozen: None
) -> None:
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": redis_url}
    call_command("runmirror", "--burst")
    assert gc.get_freeze_count() > 10_000
