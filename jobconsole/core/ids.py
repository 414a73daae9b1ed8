"""Job ids are ULIDs: sortable by creation time, safe to generate on the client (so retries are idempotent).

Ids made together are monotonic ULIDs (the spec's rule for one millisecond): one timestamp and random
prefix, then a random 30-bit counter that goes up by one per id. That keeps a batch in creation order and
costs a few table look-ups per id instead of a base32 encoding of 128 random bits each."""

import hashlib
import os
import time
from itertools import product

from ulid import ULID

from jobconsole.core.errors import InvalidJob

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = ["".join(p) for p in product(CROCKFORD, repeat=2)]  # 10 bits -> two characters
COUNTER_BITS = 30  # the last 6 characters


_SHIFTS = range(120, -1, -10)  # 130 bits (the top 2 zero) as 13 groups of 10 bits


def new_job_id() -> str:
    """One fresh ULID: 48 bits of milliseconds, 80 random bits."""
    value = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10))
    pairs = _PAIRS
    return "".join([pairs[(value >> shift) & 1023] for shift in _SHIFTS])


def new_job_ids(count: int) -> list[str]:
    """`count` fresh ULIDs, in increasing order."""
    now_ms = time.time_ns() // 1_000_000
    random_bits = int.from_bytes(os.urandom(10))  # 80 bits: 50 for the prefix, 30 for the counter start
    counter = random_bits & ((1 << COUNTER_BITS) - 1)
    if counter + count >= 1 << COUNTER_BITS:  # keep the counter from carrying into the prefix
        counter = 0
    head = (now_ms << 50) | (random_bits >> COUNTER_BITS)  # 98 bits = the first 20 characters (top 2 zero)
    pairs = _PAIRS
    prefix = "".join(pairs[(head >> shift) & 1023] for shift in range(90, -1, -10))
    return [
        prefix + pairs[(value >> 20) & 1023] + pairs[(value >> 10) & 1023] + pairs[value & 1023]
        for value in range(counter, counter + count)
    ]


def slot_job_id(schedule: str, slot_ms: int) -> str:
    """The one id a periodic schedule's slot fires under: a ULID of the slot's millisecond and 80 bits of a
    hash of the schedule's name and slot, so every scheduler that fires the slot makes the same id (and the
    enqueue script, idempotent by id, takes it once)."""
    digest = hashlib.sha256(f"{schedule}\x00{slot_ms}".encode()).digest()
    value = (slot_ms & ((1 << 48) - 1)) << 80 | int.from_bytes(digest[:10])
    return "".join([_PAIRS[(value >> shift) & 1023] for shift in _SHIFTS])


def check_job_id(value: object) -> str:
    """A client-supplied id must be a ULID (26 Crockford base32 characters); returned canonical upper-case."""
    if not isinstance(value, str) or len(value) != 26:
        raise InvalidJob(f"job id must be a 26-character ULID; got {value!r}")
    try:
        return str(ULID.from_str(value.upper()))
    except ValueError:
        raise InvalidJob(f"job id is not a valid ULID: {value!r}") from None
