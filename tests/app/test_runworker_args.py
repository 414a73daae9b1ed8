"""runworker's --queues: a strict order, or weights for a weighted one; a bad weight says what is wrong."""

import pytest
from django.core.management.base import CommandError

from jobconsole.management.commands.runworker import parse_queues


def test_queues_in_order_or_with_weights() -> None:
    assert parse_queues("emails,reports") == (["emails", "reports"], None)
    assert parse_queues("emails:3, reports") == (["emails", "reports"], {"emails": 3})
    assert parse_queues("") == ([], None)


@pytest.mark.parametrize("raw", ["emails:0", "emails:x", "emails:-1"])
def test_a_bad_weight_is_refused(raw: str) -> None:
    with pytest.raises(CommandError, match="a weight is a whole number of at least 1"):
        parse_queues(raw)
