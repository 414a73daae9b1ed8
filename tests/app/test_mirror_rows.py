"""The mirror reads job rows straight off the stored hash (rows.hash_values); the rest of the project decodes a hash
through core.job.Job. The two must never drift apart: every kind of hash gives the same row both ways."""

from datetime import UTC, datetime

import pytest

from jobconsole.core.job import Attempt, Job, attempt_history
from jobconsole.mirror.rows import (
    ATTEMPT_FIELDS,
    attempt_values,
    completed_attempt_values,
    datetime_to_sqlite,
    hash_values,
    job_values,
    ms_to_sqlite,
    sqlite_time,
)

SYNCED = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)

FULL = {
    "id": "01JD0000000000000000000001", "task": "send_email", "queue": "emails", "state": "failed",
    "priority": "-3", "attempts": "2", "max_retries": "5", "version": "4", "unique_key": "user:7",
    "enqueued_at": "1764244800000", "run_at": "1764244801000", "started_at": "1764244802123",
    "finished_at": "1764244803456", "heartbeat_at": "1764244802500", "worker": "host:1:ab", "token": "t",
    "progress": "0.25", "cancel_requested": "1", "reason": "operator", "lease_ms": "30000",
    "params": '{"to":"ada@example.com"}', "checkpoint": '{"page":3}', "result": '"ok"',
    "last_error": '{"error_class":"SMTPError","message":"refused"}', "group": "mailers",
}  # fmt: skip

HASHES = {
    "full": FULL,
    "minimal": {"id": "01JD0000000000000000000002"},
    "no run_at falls back to enqueued_at": {**FULL, "run_at": ""},
    "zero and empty times": {**FULL, "started_at": "0", "finished_at": "", "heartbeat_at": "not-a-time"},
    "unreadable numbers": {**FULL, "priority": "high", "attempts": "", "version": "", "progress": "fast"},
    "last error not JSON": {**FULL, "last_error": "boom"},
    "last error not an object": {**FULL, "last_error": "[1, 2]"},
    "last error without a class": {**FULL, "last_error": '{"message": "x"}'},
    "long error class": {**FULL, "last_error": '{"error_class": "%s"}' % ("E" * 300)},
    "empty params": {**FULL, "params": ""},
    "not cancelled": {**FULL, "cancel_requested": "0"},
    "waiting with its release options": {
        **FULL,
        "state": "waiting",
        "workflow": "01JD0000000000000000000009",
        "step": "merge",
        "deps_n": "2",
        "pass": "dict",
        "splice_at": "11",
        "when": "failure",
        "release_delay": "5000",
    },
    "released: its splice done": {**FULL, "deps_n": "1", "pass": "one"},
    "NUL in its texts": {**FULL, "reason": "a\x00b", "last_error": '{"error_class":"E\\u0000","message":"m"}'},
    "times on whole seconds, before 1970, out of range": {
        **FULL,
        "enqueued_at": "1764244800000",
        "run_at": "-1500",
        "started_at": "99999999999999999",
        "finished_at": "1.5",
    },
}


def test_a_job_with_parents_keeps_its_release_options_for_a_restore() -> None:
    row = hash_values(HASHES["waiting with its release options"], SYNCED)
    assert row[-1] == '{"pass":"dict","splice_at":"11","when":"failure","release_delay":"5000"}'
    assert hash_values(FULL, SYNCED)[-1] == ""  # a job without parents: nothing


@pytest.mark.parametrize("h", HASHES.values(), ids=HASHES.keys())
def test_hash_values_equal_job_values_of_the_decoded_job(h: dict[str, str]) -> None:
    assert hash_values(h, SYNCED) == job_values(Job.from_hash(h), SYNCED)


def test_an_unknown_state_fails_both_ways_alike() -> None:
    h = {**FULL, "state": "exploded"}
    with pytest.raises(ValueError):
        Job.from_hash(h)
    with pytest.raises(ValueError):
        hash_values(h, SYNCED)


@pytest.mark.parametrize("h", HASHES.values(), ids=HASHES.keys())
def test_sqlite_times_are_the_text_django_stores(h: dict[str, str]) -> None:
    """On SQLite the writer makes the times' text straight from Redis's milliseconds (rows.ms_to_sqlite): the same
    text Django writes for the datetime."""
    with_datetimes = hash_values(h, SYNCED)
    stored = tuple(sqlite_time(v) if isinstance(v, datetime) else v for v in with_datetimes)
    assert hash_values(h, sqlite_time(SYNCED), ms_to_sqlite) == stored


def test_sqlite_time_is_djangos() -> None:
    from django.db import connection

    for ms in ("1764244800000", "1764244803456", "1764244803050", "1", "999", "1000", "0000", " 1500", "-1500", "١٢٣٤"):
        value = Job.from_hash({**FULL, "started_at": ms}).started_at
        assert value is not None
        assert ms_to_sqlite(ms) == sqlite_time(value)
        if connection.vendor == "sqlite":
            assert ms_to_sqlite(ms) == connection.ops.adapt_datetimefield_value(value)


ENTRIES = [
    '{"attempt":1,"outcome":"failed","worker":"w","host":"h","pid":7,"started_at":1764244802123,'
    '"ended_at":1764244803000,"error_class":"E","message":"m\\u0000","traceback":"t","top_frame":"f"}',
    '{"attempt":2,"outcome":"completed","worker":"w","host":"h","pid":7,"started_at":1764244804000}',
    "not json",
]


def test_attempt_rows_with_sqlite_times_are_the_text_django_stores() -> None:
    history = [Attempt.from_json(a) for a in ENTRIES]
    with_datetimes = attempt_values("j1", history)
    assert with_datetimes[0][ATTEMPT_FIELDS.index("message") + 2] == "m\ufffd"  # NUL replaced
    stored = [tuple(sqlite_time(v) if isinstance(v, datetime) else v for v in row) for row in with_datetimes]
    assert attempt_values("j1", history, datetime_to_sqlite) == stored


COMPLETED = {**FULL, "state": "completed", "attempts": "1", "host": "box", "pid": "41"}
FIRST_ATTEMPTS = {
    "completed": COMPLETED,
    "no times": {**COMPLETED, "started_at": "", "finished_at": "0"},
    "unreadable numbers": {**COMPLETED, "attempts": "x", "pid": "", "started_at": "soon"},
    "NUL in its worker": {**COMPLETED, "worker": "w\x00"},
    "long names": {**COMPLETED, "worker": "w" * 300, "host": "h" * 300},
    "minimal": {"id": "01JD0000000000000000000002", "state": "completed"},
}


@pytest.mark.parametrize("h", FIRST_ATTEMPTS.values(), ids=FIRST_ATTEMPTS.keys())
def test_a_first_attempt_read_off_the_hash_equals_its_decoded_attempt(h: dict[str, str]) -> None:
    """The writer's hot path for a job whose first attempt succeeded (no attempt entries: the hash records it)."""
    decoded = attempt_history(h, [])
    assert completed_attempt_values(h["id"], h) == attempt_values(h["id"], decoded)
    assert completed_attempt_values(h["id"], h, ms_to_sqlite) == attempt_values(h["id"], decoded, datetime_to_sqlite)
