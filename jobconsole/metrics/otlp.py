"""OpenTelemetry export of the same metrics as /metrics (catalog.py), over OTLP, when the standard OTEL
environment variables ask for it.

When: OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set, OTEL_SDK_DISABLED is not
"true" and OTEL_METRICS_EXPORTER (if set) names "otlp". The exporter itself reads the rest of the standard
variables: headers, timeout, compression, certificates, and OTEL_EXPORTER_OTLP[_METRICS]_PROTOCOL
("http/protobuf", the default, or "grpc" when opentelemetry-exporter-otlp-proto-grpc is installed); the resource
comes from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (service.name "jobconsole" unless they name one).
Every OTEL_METRIC_EXPORT_INTERVAL milliseconds (60000).

Who exports: the mirror leader, as one of its chores (mirror/service.py), so one process exports for the whole
deployment whatever the number of web and worker processes. The chore only wakes the exporting thread: a slow
or unreachable collector never holds up the mirror. A collector that is down loses nothing: the values are
totals, and the next export carries them.

What: one reading of the engine (no job scanned), as cumulative sums (monotonic: the counters), histograms with
the engine's buckets (explicit bounds in the metric's unit), and gauges. The totals count since 00:00 UTC
(totals.py), which is each point's start time: a new day is a new start, which OTLP readers treat as a reset.

The packages are optional (the otel extra: `pip install "/path/to/checkout[otel]"`, or the two opentelemetry
packages; requirements-dev.txt here). Without them, an
environment asking for the export gets a warning in the log and no export.
"""

import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from django.db import close_old_connections

from jobconsole.core.queries import Queries
from jobconsole.engine import get_client
from jobconsole.metrics.catalog import Family, Reading, families, read

log = logging.getLogger(__name__)

SERVICE_NAME = "jobconsole"
SCOPE = "jobconsole"
DEFAULT_INTERVAL_MS = 60_000


class ExportUnavailable(RuntimeError):
    """The environment asks for an export this installation cannot make (a package or protocol is missing)."""


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the OTEL environment variables ask for a metrics export over OTLP."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = [e.strip().lower() for e in environ.get("OTEL_METRICS_EXPORTER", "otlp").split(",")]
    if "otlp" not in exporters:
        return False
    return bool(environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def interval(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds between exports (OTEL_METRIC_EXPORT_INTERVAL is in milliseconds)."""
    text = environ.get("OTEL_METRIC_EXPORT_INTERVAL", "")
    try:
        ms = float(text) if text else DEFAULT_INTERVAL_MS
    except ValueError:
        log.warning("OTEL_METRIC_EXPORT_INTERVAL=%r is not a number; exporting every %d ms", text, DEFAULT_INTERVAL_MS)
        ms = DEFAULT_INTERVAL_MS
    return max(ms, 1000.0) / 1000


def build_exporter(environ: Mapping[str, str] = os.environ) -> Any:
    """The OTLP metric exporter the environment names. Raises ExportUnavailable when it is not installed."""
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    ).strip() or "http/protobuf"
    try:
        if protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        elif protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (  # type: ignore[no-redef]
                OTLPMetricExporter,
            )
        else:
            raise ExportUnavailable(f"OTLP protocol {protocol!r} is not supported: use http/protobuf or grpc")
    except ImportError as exc:
        raise ExportUnavailable(
            f"the OTLP {protocol} exporter is not installed ({exc.name}): install Jobconsole's otel extra "
            "(docs/metrics.md says how)"
        ) from None
    return OTLPMetricExporter()


def resource() -> Any:
    from opentelemetry.sdk.resources import SERVICE_NAME as SERVICE_NAME_KEY
    from opentelemetry.sdk.resources import Resource

    detected = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES and the SDK's own attributes
    if str(detected.attributes.get(SERVICE_NAME_KEY, "")).startswith("unknown_service"):
        detected = detected.merge(Resource({SERVICE_NAME_KEY: SERVICE_NAME}))
    return detected


def metrics_data(reading: Reading, resource_: Any) -> Any:
    """A reading as the SDK's MetricsData, ready for any metric exporter."""
    from opentelemetry.sdk.metrics.export import (
        AggregationTemporality,
        Gauge,
        Histogram,
        HistogramDataPoint,
        Metric,
        MetricsData,
        NumberDataPoint,
        ResourceMetrics,
        ScopeMetrics,
        Sum,
    )
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    start = int(reading.since.timestamp() * 1e9)
    now = int(reading.at.timestamp() * 1e9)
    cumulative = AggregationTemporality.CUMULATIVE

    def metric(family: Family) -> Any:
        data: Any
        if family.kind == "histogram":
            bounds = list(family.bounds)
            # The engine keeps no min or max (nor, per status, a run-time sum): None leaves them unset in OTLP.
            unknown: Any = None
            points = [
                HistogramDataPoint(
                    attributes=p.labels, start_time_unix_nano=start, time_unix_nano=now, count=p.count,
                    sum=unknown if p.sum is None else p.sum, bucket_counts=list(p.buckets), explicit_bounds=bounds,
                    min=unknown, max=unknown,
                )
                for p in family.points
            ]  # fmt: skip
            data = Histogram(data_points=points, aggregation_temporality=cumulative)
        elif family.kind == "counter":
            numbers = [NumberDataPoint(p.labels, start, now, _number(p.value)) for p in family.points]
            data = Sum(data_points=numbers, aggregation_temporality=cumulative, is_monotonic=True)
        else:
            data = Gauge(data_points=[NumberDataPoint(p.labels, start, now, _number(p.value)) for p in family.points])
        return Metric(name=family.name, description=family.help, unit=family.unit or "1", data=data)

    scope = ScopeMetrics(InstrumentationScope(SCOPE), [metric(f) for f in families(reading)], "")
    return MetricsData([ResourceMetrics(resource_, [scope], "")])


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


class OtlpExport:
    """Exports one reading per call, in a thread of its own: `trigger()` returns at once; a call while an export
    is still under way is skipped (the next one carries the same totals, and more)."""

    def __init__(self, exporter: Any, queries: Callable[[], Queries] = lambda: get_client().queries) -> None:
        self.exporter = exporter
        self.resource = resource()
        self._queries = queries
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def export(self) -> bool:
        """Read and export now, in the calling thread; True when the collector accepted it."""
        from opentelemetry.sdk.metrics.export import MetricExportResult

        data = metrics_data(read(self._queries()), self.resource)
        return bool(self.exporter.export(data) is MetricExportResult.SUCCESS)

    def trigger(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="jobconsole-otlp", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            try:
                if not self.export():
                    log.warning("OpenTelemetry metrics export was refused or failed; the next one carries the totals")
            except Exception:
                log.exception("OpenTelemetry metrics export failed")
            finally:
                close_old_connections()


def from_environment(environ: Mapping[str, str] = os.environ) -> OtlpExport | None:
    """The export the environment asks for, or None (not asked for, or not possible: then a warning says why)."""
    if not wanted(environ):
        return None
    try:
        exporter = build_exporter(environ)
    except ExportUnavailable as exc:
        log.warning("OTEL environment variables ask for a metrics export, but %s", exc)
        return None
    log.info("exporting metrics over OTLP every %.0f s while this process leads the mirror", interval(environ))
    return OtlpExport(exporter)
