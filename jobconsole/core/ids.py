"""Job ids are ULIDs: sortable by creation time, safe to generate on the client (so retries are idempotent)."""

from ulid import ULID

from jobconsole.core.errors import InvalidJob


def new_job_id() -> str:
    return str(ULID())


def check_job_id(value: object) -> str:
    """A client-supplied id must be a ULID (26 Crockford base32 characters); returned canonical upper-case."""
    if not isinstance(value, str) or len(value) != 26:
        raise InvalidJob(f"job id must be a 26-character ULID; got {value!r}")
    try:
        return str(ULID.from_str(value.upper()))
    except ValueError:
        raise InvalidJob(f"job id is not a valid ULID: {value!r}") from None
