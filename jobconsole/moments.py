"""Times that come from outside (filters, cursors, request bodies), made safe for every database."""

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def to_utc(moment: datetime) -> datetime:
    """The same instant in UTC.

    Python accepts zone offsets up to ±23:59, PostgreSQL only up to ±15:59 (an error, not a row, for anything
    past it): in UTC every database takes it. An instant near year 1 or 9999 may not exist in UTC: ValueError
    then, and for a time without a zone, which callers report as bad input.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{moment.isoformat()} has no time zone")
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{moment.isoformat()} is out of range in UTC") from None


def to_micros(moment: datetime) -> int:
    """Microseconds since the epoch: the time part of a cursor ("<micros>~<key>"), exact where floats are not."""
    return (to_utc(moment) - EPOCH) // MICROSECOND


def from_micros(micros: int) -> datetime:
    return EPOCH + micros * MICROSECOND
