"""Time buckets: the resolutions the database keeps, how long each is kept, and how a range picks one.

A chart over a range gets the finest resolution that both fits in METRICS.MAX_POINTS buckets and is still kept
for the whole range: an hour comes in 1-minute buckets, a day in 10-minute ones, a week in hourly ones."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from jobconsole.conf import metrics_config

MINUTE, TEN_MINUTES, HOUR = 60, 600, 3600
RESOLUTIONS: tuple[int, ...] = (MINUTE, TEN_MINUTES, HOUR)
RAW = 0  # the resolution of single depth samples (QueueSample)
SPANS: dict[str, timedelta] = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(weeks=1)}


class UnknownSpan(ValueError):
    """A range that is not one of SPANS nor a positive duration (a page answers it with a 400)."""


def keep(resolution: int) -> timedelta:
    """How long the database keeps buckets of a resolution (single depth samples: as long as 1-minute buckets)."""
    config = metrics_config()
    seconds = {
        RAW: config["KEEP_MINUTES"],
        MINUTE: config["KEEP_MINUTES"],
        TEN_MINUTES: config["KEEP_TEN_MINUTES"],
        HOUR: config["KEEP_HOURS"],
    }[resolution]
    return timedelta(seconds=seconds)


def floor_time(at: datetime, seconds: int) -> datetime:
    """The start of the `seconds`-long bucket holding `at` (buckets are aligned on the Unix epoch)."""
    stamp = int(at.timestamp())
    return datetime.fromtimestamp(stamp - stamp % seconds, tz=UTC)


def minute_of(at: datetime) -> int:
    """Unix minutes: how the Redis counters name a minute."""
    return int(at.timestamp()) // 60


def parse_span(span: str | timedelta) -> timedelta:
    if isinstance(span, timedelta):
        if span <= timedelta(0):
            raise UnknownSpan(f"a range must be positive; got {span}")
        return span
    try:
        return SPANS[span]
    except KeyError:
        raise UnknownSpan(f"unknown range {span!r}; choose one of: {', '.join(SPANS)}") from None


@dataclass(frozen=True, slots=True)
class Window:
    """Buckets of `resolution` seconds from `start` (aligned) to the one holding `end` (now: partial, live)."""

    start: datetime
    end: datetime
    resolution: int

    @property
    def buckets(self) -> list[datetime]:
        step = timedelta(seconds=self.resolution)
        out, at = [], self.start
        while at <= self.end:
            out.append(at)
            at += step
        return out

    def bucket_of(self, at: datetime) -> datetime:
        return floor_time(at, self.resolution)

    def __contains__(self, at: object) -> bool:
        return isinstance(at, datetime) and self.start <= at <= self.end


def choose(span: str | timedelta, end: datetime, *, max_points: int | None = None) -> Window:
    """The window of a range ending at `end`, at the finest resolution kept that long and fitting `max_points`
    (default METRICS.MAX_POINTS); the coarsest one when none does."""
    length = parse_span(span)
    limit = max_points or metrics_config()["MAX_POINTS"]
    for resolution in RESOLUTIONS:
        if length.total_seconds() / resolution <= limit and length <= keep(resolution):
            break
    return Window(floor_time(end - length, resolution), end, resolution)


def sample_resolution(span: str | timedelta, *, max_points: int | None = None) -> int:
    """The depth samples' resolution for a range: single samples (RAW) while they fit, else 10-minute or hourly
    maxima."""
    length = parse_span(span)
    limit = max_points or metrics_config()["MAX_POINTS"]
    if length.total_seconds() / metrics_config()["SAMPLE_EVERY"] <= limit and length <= keep(RAW):
        return RAW
    for resolution in (TEN_MINUTES, HOUR):
        if length.total_seconds() / resolution <= limit and length <= keep(resolution):
            return resolution
    return HOUR
