"""runworker's --queues: a strict order, or weights for a weighted one; a bad weight says what is wrong. --processes:
a number or auto; the worker processes' ids."""

import re

import pytest
from django.core.management.base import CommandError

from jobconsole.management.commands.runworker import child_name, parse_queues
from jobconsole.management.processes import cpu_count, parse_processes


def test_queues_in_order_or_with_weights() -> None:
    assert parse_queues("emails,reports") == (["emails", "reports"], None)
    assert parse_queues("emails:3, reports") == (["emails", "reports"], {"emails": 3})
    assert parse_queues("") == ([], None)


@pytest.mark.parametrize("raw", ["emails:0", "emails:x", "emails:-1"])
def test_a_bad_weight_is_refused(raw: str) -> None:
    with pytest.raises(CommandError, match="a weight is a whole number of at least 1"):
        parse_queues(raw)


def test_processes_a_number_or_auto_for_the_cores() -> None:
    assert parse_processes("3") == 3
    assert parse_processes("auto") == parse_processes("AUTO") == cpu_count() >= 1
    for raw in ("0", "-1", "two", ""):
        with pytest.raises(ValueError, match="give a whole number of at least 1, or auto for the cores"):
            parse_processes(raw)


def test_worker_process_ids_from_name() -> None:
    assert child_name(None, 1, 2, 1) is None  # each process takes host:pid:random
    assert child_name("w", 1, 1, 1) == "w"  # one process: the name itself, as without a supervisor
    assert [child_name("w", slot, 2, 1) for slot in (1, 2)] == ["w-1", "w-2"]
    restarted = child_name("w", 2, 2, 3)
    assert restarted is not None and re.fullmatch(r"w-2:[0-9a-f]{4}", restarted)  # a new id after a restart
