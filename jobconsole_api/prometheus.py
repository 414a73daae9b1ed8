"""The Prometheus rendering of the exported metrics (jobconsole/metrics/catalog.py): a collector that reads the
engine at scrape time.

Nothing is counted in this process: every value comes from Redis and the database when Prometheus scrapes, so
every gunicorn worker answers the same figures and none drifts (the usual prometheus-client counters live in one
process's memory, and each worker would keep its own). The registry holds only this collector: no process_* or
python_* metrics, which would describe whichever worker happened to answer.
"""

from collections.abc import Callable, Iterator

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from jobconsole.core.queries import Queries
from jobconsole.engine import get_client
from jobconsole.metrics.catalog import Family, Point, Reading, families, read


class EngineCollector(Collector):
    """Reads the engine's counters, gauges and workers each time it is collected."""

    def __init__(self, queries: Callable[[], Queries] = lambda: get_client().queries) -> None:
        self._queries = queries

    def collect(self) -> Iterator[Metric]:
        reading = read(self._queries())  # a RedisError propagates: the view answers 503
        for family in families(reading):
            yield render(family, reading)


def render(family: Family, reading: Reading) -> Metric:
    """One family as prometheus-client's metric family; counters and histograms carry `_created`, the instant
    they started counting (00:00 UTC: see jobconsole/metrics/totals.py)."""
    created = reading.since.timestamp()
    names = list(family.labels)
    if family.kind == "counter":
        counter = CounterMetricFamily(family.name, family.help, labels=names)
        for point in family.points:
            counter.add_metric(_values(family, point), point.value, created=created)
        return counter
    if family.kind == "gauge":
        gauge = GaugeMetricFamily(family.name, family.help, labels=names)
        for point in family.points:
            gauge.add_metric(_values(family, point), point.value)
        return gauge
    histogram = HistogramMetricFamily(family.name, family.help, labels=names)
    for point in family.points:
        histogram.add_metric(_values(family, point), _cumulative(family, point), point.sum)
        histogram.samples.append(Sample(f"{family.name}_created", point.labels, created))
    return histogram


def _values(family: Family, point: Point) -> list[str]:
    return [point.labels[name] for name in family.labels]


def _cumulative(family: Family, point: Point) -> list[tuple[str, float]]:
    """(le, count of the buckets up to it) pairs, +Inf last."""
    out: list[tuple[str, float]] = []
    seen = 0
    for bound, n in zip(family.bounds, point.buckets, strict=False):
        seen += n
        out.append((_go_float(bound), seen))
    out.append(("+Inf", point.count))
    return out


def _go_float(bound: float) -> str:
    """A bucket bound written as prometheus-client writes its own (Go's float format: "7.0", "1.048575e+06")."""
    text: str = floatToGoString(bound)  # type: ignore[no-untyped-call]
    return text


def registry() -> CollectorRegistry:
    """A registry with only the engine's collector (cheap: it holds no state, so each scrape may build one)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector())
    return registry
