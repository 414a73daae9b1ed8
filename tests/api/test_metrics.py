"""/metrics: real jobs run by a real worker, scraped and parsed with prometheus-client's own parsers; the values
must be what happened (counts per queue, task and status, latency buckets, depths, workers), the same after the
mirror leader's rollup moved minutes to the database, and only since 00:00 UTC. Access by token or from loopback
when allowed; Redis down is a 503."""

import os
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from django.db import OperationalError
from django.test import Client as HttpClient
from django.utils import timezone
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families

from jobconsole.core import Client
from jobconsole.core.keys import queue_keys
from jobconsole.metrics import otlp, rollup, totals
from jobconsole.mirror.leader import Leadership
from jobconsole.mirror.service import leader_chores
from jobconsole.models import MetricsCursor
from jobconsole_api.models import ApiToken
from tests.helpers import wait_for, worker_in_thread
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import run_worker
from tests.redis_server import free_port

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

DOCS = Path(__file__).resolve().parents[2] / "docs"
METRICS_DOC = DOCS / "metrics.md"

type Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def token() -> str:
    return ApiToken.objects.issue("prometheus", "read")[1]


def scrape(token: str | None = None, **headers: str) -> Any:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return HttpClient().get("/metrics", headers=headers)


def samples(text: str, parse: Any = text_string_to_metric_families) -> Samples:
    """Every sample of an exposition: (name, labels) -> value."""
    out: Samples = {}
    for family in parse(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(found: Samples, name: str, **labels: str) -> float:
    return found[(name, frozenset(labels.items()))]


def matching(found: Samples, name: str, **labels: str) -> dict[frozenset[tuple[str, str]], float]:
    """The samples of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return {key: v for (n, key), v in found.items() if n == name and wanted <= key}


def run_real_jobs(client: Client, r: Any) -> None:
    """3 echoes that complete; examples.fail: 3 attempts fail, 2 retried, then dead; examples.flaky: 1 failed
    attempt retried, then completed. Run by a worker until nothing is left (retries are 0.2-0.5 s away)."""
    for i in range(3):
        client.enqueue("examples.echo", {"i": i})
    client.enqueue("examples.fail", {"message": "boom"})
    client.enqueue("examples.flaky", {"failures": 1})
    run_worker(r, ["examples.echo", "examples.fail", "examples.flaky"], burst_horizon=2.0)


def test_counts_latencies_and_depths_are_what_the_worker_did(client: Client, r: Any, token: str) -> None:
    run_real_jobs(client, r)
    client.enqueue("examples.echo", {}, queue="idle")  # no worker serves "idle": two wait, one is scheduled
    client.enqueue("examples.echo", {}, queue="idle")
    client.enqueue("examples.echo", {}, queue="idle", delay=3600)

    response = scrape(token)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    found = samples(response.content.decode())

    echo = {"queue": "examples.echo", "task": "examples.echo"}
    fail = {"queue": "examples.fail", "task": "examples.fail"}
    flaky = {"queue": "examples.flaky", "task": "examples.flaky"}
    expected_processed = {  # (labels, status): attempts
        (frozenset(echo.items()), "completed"): 3, (frozenset(echo.items()), "failed"): 0,
        (frozenset(fail.items()), "completed"): 0, (frozenset(fail.items()), "failed"): 3,
        (frozenset(flaky.items()), "completed"): 1, (frozenset(flaky.items()), "failed"): 1,
    }  # fmt: skip
    for (labels, status), n in expected_processed.items():
        assert value(found, "tasks_processed_total", **dict(labels), status=status) == n, (labels, status)
        assert value(found, "tasks_processed_total", **dict(labels), status="lost") == 0
    assert value(found, "tasks_retried_total", **fail, version="1") == 2
    assert value(found, "tasks_retried_total", **flaky, version="1") == 1
    assert value(found, "tasks_retried_total", **echo, version="1") == 0
    assert value(found, "tasks_dead_lettered_total", **fail, version="1") == 1
    assert value(found, "tasks_dead_lettered_total", **flaky, version="1") == 0
    for labels, started in ((echo, 3), (fail, 3), (flaky, 2)):
        assert value(found, "tasks_selected_total", **labels, role="all") == started
        assert value(found, "time_in_queue_count", **labels, role="all") == started
        assert value(found, "time_in_queue_bucket", **labels, role="all", le="+Inf") == started
        assert value(found, "time_in_queue_sum", **labels, role="all") >= 0
    for labels, status, n in ((echo, "completed", 3), (fail, "failed", 3), (flaky, "failed", 1)):
        assert value(found, "execution_time_bucket", **labels, status=status, le="+Inf") == n
        assert value(found, "end_to_end_latency_bucket", **labels, status=status, le="+Inf") == n
    assert value(found, "end_to_end_latency_bucket", **flaky, status="completed", le="+Inf") == 1
    assert not matching(found, "execution_time_sum"), "the engine keeps no run-time sum per status"

    # The Go scheduler's names: per task (type), over every queue; "idle" got 3 echoes that never ran.
    assert value(found, "jobs_submitted_total", type="examples.echo", priority="all") == 6
    assert value(found, "jobs_submitted_total", type="examples.fail", priority="all") == 1
    assert value(found, "jobs_processed_total", type="examples.fail", status="failed") == 3
    assert value(found, "jobs_processed_total", type="examples.flaky", status="completed") == 1
    assert value(found, "job_duration_seconds_count", type="examples.fail") == 3
    assert value(found, "job_duration_seconds_count", type="examples.echo") == 3
    assert value(found, "job_duration_seconds_sum", type="examples.echo") >= 0

    depth = {(dict(k)["queue"], dict(k)["state"]): v for k, v in matching(found, "jobconsole_queue_jobs").items()}
    assert {k: v for k, v in depth.items() if k[0] == "idle"} == {
        ("idle", "waiting"): 2,
        ("idle", "scheduled"): 1,
        ("idle", "running"): 0,
        ("idle", "dead"): 0,
    }
    assert depth[("examples.fail", "dead")] == 1 and depth[("examples.echo", "waiting")] == 0
    assert value(found, "jobconsole_queue_oldest_wait_seconds", queue="idle") >= 0
    assert value(found, "jobconsole_queue_paused", queue="idle") == 0


def test_histogram_buckets_are_the_engines_with_inclusive_whole_millisecond_bounds(
    client: Client, r: Any, token: str
) -> None:
    client.enqueue("examples.sleep", {"seconds": 0.3})  # 300 ms: the engine's bucket [256, 512) ms
    run_worker(r, ["examples.sleep"])
    found = samples(scrape(token).content.decode())
    labels = {"queue": "examples.sleep", "task": "examples.sleep", "status": "completed"}
    assert value(found, "execution_time_bucket", **labels, le="255.0") == 0
    assert value(found, "execution_time_bucket", **labels, le="511.0") == 1
    assert value(found, "execution_time_bucket", **labels, le="+Inf") == 1
    seconds = matching(found, "job_duration_seconds_bucket", type="examples.sleep")
    assert {dict(k)["le"]: v for k, v in seconds.items()}["0.255"] == 0
    assert {dict(k)["le"]: v for k, v in seconds.items()}["0.511"] == 1
    assert 0.3 <= value(found, "job_duration_seconds_sum", type="examples.sleep") < 0.511
    bounds = sorted(float(dict(k)["le"]) for k in seconds)
    assert bounds[:4] == [0.0, 0.001, 0.003, 0.007] and bounds[-2] == 4194.303 and len(bounds) == 24


def minute_now(client: Client) -> int:
    """The current minute (Redis's clock) once it is 10 to 45 seconds old, and not the first minutes of the day:
    the test then ends in the minute it began in, and the minutes before it are closed."""
    while True:
        ms = client.queries.now_ms()
        minute = ms // 60_000
        if minute % 1440 < 3 or minute % 1440 == 1439:
            pytest.skip("the first minutes of the day (UTC) have no earlier minutes of today to count")
        if 10_000 <= ms % 60_000 <= 45_000:
            return minute
        time.sleep(0.5)


def test_totals_count_since_midnight_and_a_rollup_moves_minutes_without_changing_them(
    client: Client, r: Any, token: str
) -> None:
    now = minute_now(client)
    midnight = now - now % 1440
    stats = queue_keys("examples.echo").stats
    r.hset(stats, mapping={  # counters of earlier minutes as the scripts write them
        f"{midnight - 1}|enqueued|examples.echo": 1000,  # yesterday: never counted
        f"{midnight}|enqueued|examples.echo": 10,
        f"{now - 2}|enqueued|examples.echo": 5,
        f"{now - 2}|done_h:3|examples.echo": 4,  # four completed in [4, 8) ms
        f"{now - 2}|runtime_ms|examples.echo": 20,
    })  # fmt: skip
    client.queries.store.register_queues(["examples.echo"])
    run_real_jobs(client, r)  # 3 echoes enqueued and completed in this minute
    before = samples(scrape(token).content.decode())
    assert value(before, "jobs_submitted_total", type="examples.echo", priority="all") == 10 + 5 + 3
    completed = {"queue": "examples.echo", "task": "examples.echo", "status": "completed"}
    assert value(before, "tasks_processed_total", **completed) == 4 + 3
    assert value(before, "execution_time_bucket", **completed, le="7.0") >= 4
    created = value(before, "tasks_processed_created", **completed)
    assert created == midnight * 60 == value(before, "execution_time_created", **completed)

    assert rollup.rollup(client.queries) > 0  # the closed minutes now come from the database
    assert MetricsCursor.objects.get(queue="examples.echo").flushed_through >= now - 2
    after = samples(scrape(token).content.decode())
    assert after == before

    client.enqueue("examples.echo", {})  # a live count after the cursor adds to the database's rows
    run_worker(r, ["examples.echo"])
    later = samples(scrape(token).content.decode())
    assert value(later, "jobs_submitted_total", type="examples.echo", priority="all") == 10 + 5 + 3 + 1
    assert value(later, "tasks_processed_total", **completed) == 4 + 3 + 1


def test_a_cursor_far_behind_reads_the_minutes_after_it_from_redis(client: Client, r: Any, token: str) -> None:
    now = minute_now(client)
    if now % 1440 < 50:
        pytest.skip("needs 50 minutes of today behind it")
    stats = queue_keys("examples.echo").stats
    counts = {now - 48: 1, now - 40: 2, now - 20: 4, now - 2: 8}
    r.hset(stats, mapping={f"{m}|enqueued|examples.echo": n for m, n in counts.items()})
    client.queries.store.register_queues(["examples.echo"])
    # A rollup that stopped 45 minutes ago: the minute before it is in the database, the rest only in Redis.
    minutes = client.queries.stats.minute_counts("examples.echo", now - 50, now - 45)
    rollup.copy_minutes("examples.echo", minutes, now - 50, now - 45)
    assert totals.LIVE_LIMIT < 45
    submitted = {"type": "examples.echo", "priority": "all"}
    assert value(samples(scrape(token).content.decode()), "jobs_submitted_total", **submitted) == 15
    rollup.rollup(client.queries)  # catches up: the same total, now mostly from the database
    assert MetricsCursor.objects.get(queue="examples.echo").flushed_through >= now - 2
    assert value(samples(scrape(token).content.decode()), "jobs_submitted_total", **submitted) == 15


def test_workers_are_counted_while_they_run(client: Client, r: Any, token: str) -> None:
    from jobconsole.core import default_registry

    with worker_in_thread(r, default_registry, ["examples.echo", "emails"], concurrency=3):
        wait_for(lambda: client.queries.workers.all())
        client.enqueue("examples.echo", {})
        found = samples(scrape(token).content.decode())
        assert value(found, "jobconsole_workers", state="running") == 1
        assert value(found, "jobconsole_queue_workers", queue="examples.echo") == 1
        assert value(found, "jobconsole_worker_threads") == 3


def test_openmetrics_when_the_scraper_asks_for_it(client: Client, r: Any, token: str) -> None:
    client.enqueue("examples.echo", {})
    run_worker(r, ["examples.echo"])
    response = scrape(token, Accept="application/openmetrics-text; version=1.0.0")
    assert response["Content-Type"].startswith("application/openmetrics-text")
    text = response.content.decode()
    assert text.endswith("# EOF\n")
    found = samples(text, parse_openmetrics)
    labels = {"queue": "examples.echo", "task": "examples.echo", "status": "completed"}
    assert value(found, "tasks_processed_total", **labels) == 1


# --- access ---------------------------------------------------------------------------------------


def test_a_token_is_required(client: Client, token: str) -> None:
    response = scrape()
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
    assert response["Content-Type"] == "application/problem+json"
    assert scrape("jc_not-a-token").status_code == 401
    assert scrape(token).status_code == 200
    operate = ApiToken.objects.issue("ops", "operate")[1]
    assert scrape(operate).status_code == 200  # operate includes read
    revoked, plain = ApiToken.objects.issue("old", "read")
    ApiToken.objects.filter(pk=revoked.pk).update(revoked_at=timezone.now())
    assert scrape(plain).status_code == 401


def test_a_submit_token_or_a_limited_one_is_403(client: Client) -> None:
    submit = ApiToken.objects.issue("producer", "submit")[1]
    response = scrape(submit)
    assert response.status_code == 403 and "'read'" in response.json()["detail"]
    limited = ApiToken.objects.issue("billing dashboard", "read", queues=["billing"])[1]
    response = scrape(limited)
    assert response.status_code == 403 and "shows every queue" in response.json()["detail"]


def test_loopback_scrapes_without_a_token_only_when_allowed(client: Client, settings: Any) -> None:
    assert scrape().status_code == 401  # the test client's REMOTE_ADDR is 127.0.0.1
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "METRICS": {"ANONYMOUS_LOOPBACK": True}}
    assert scrape().status_code == 200
    assert scrape(**{"X-Forwarded-For": "203.0.113.9"}).status_code == 401  # a proxy forwarded it
    assert scrape(**{"Forwarded": "for=203.0.113.9"}).status_code == 401
    assert HttpClient(REMOTE_ADDR="192.0.2.1").get("/metrics").status_code == 401
    assert HttpClient(REMOTE_ADDR="::1").get("/metrics").status_code == 200
    assert scrape("jc_wrong").status_code == 401  # a token sent is checked


def test_only_get(client: Client, token: str) -> None:
    response = HttpClient().post("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 405 and "GET" in response["Allow"]


def test_redis_down_is_503_with_retry_after(settings: Any, token: str) -> None:
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    response = scrape(token)
    assert response.status_code == 503 and int(response["Retry-After"]) > 0
    assert "Redis" in response.json()["detail"]


def test_database_down_is_503_too(client: Client, token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    client.enqueue("examples.echo", {})

    def refuse() -> Any:
        raise OperationalError("connection to server at 10.0.0.5 failed: Connection refused")

    monkeypatch.setattr(totals, "consistent_reads", refuse)
    response = scrape(token)
    assert response.status_code == 503 and int(response["Retry-After"]) > 0
    assert "database" in response.json()["detail"]
    monkeypatch.undo()
    assert scrape(token).status_code == 200
    monkeypatch.setattr(ApiToken.objects, "filter", lambda **kwargs: refuse())  # the token's lookup
    response = scrape(token)
    assert response.status_code == 503 and "database" in response.json()["detail"]


def documented_metrics() -> set[str]:
    """The first column of docs/metrics.md's table of metrics."""
    return {line.split("`")[1] for line in METRICS_DOC.read_text().splitlines() if line.startswith("| `")}


def test_docs_list_every_exposed_metric_and_no_other(client: Client, r: Any, token: str) -> None:
    run_real_jobs(client, r)
    exposed = {
        f.name.removesuffix("_total")
        for f in text_string_to_metric_families(scrape(token).content.decode())
        if not f.name.endswith("_created")  # the 0.0.4 format writes each counter's start as a gauge of its own
    }
    assert exposed == {name.removesuffix("_total") for name in documented_metrics()}


def test_the_keda_example_queries_the_depth_gauge_the_endpoint_exposes(client: Client, r: Any, token: str) -> None:
    yaml = pytest.importorskip("yaml")
    [scaled] = [d for d in yaml.safe_load_all((DOCS / "deploy" / "keda.yaml").read_text()) if d]
    assert scaled["apiVersion"] == "keda.sh/v1alpha1" and scaled["kind"] == "ScaledObject"
    [trigger] = scaled["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    query = trigger["metadata"]["query"]
    assert "jobconsole_queue_jobs{" in query and 'state=~"waiting|running"' in query
    assert float(trigger["metadata"]["threshold"]) > 0
    client.enqueue("examples.echo", {}, queue="emails")
    found = samples(scrape(token).content.decode())
    assert value(found, "jobconsole_queue_jobs", queue="emails", state="waiting") == 1
    assert value(found, "jobconsole_queue_jobs", queue="emails", state="running") == 0


# --- OpenTelemetry ---------------------------------------------------------------------------------


class Receiver:
    """A tiny OTLP/HTTP receiver: an http.server in a thread keeping each POST's path, headers and body."""

    def __init__(self, status: int = 200) -> None:
        received: list[tuple[str, dict[str, str], bytes]] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def request(self, i: int = -1) -> Any:
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

        return ExportMetricsServiceRequest.FromString(self.received[i][2])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    found = Receiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", found.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-scope=jobs")
    yield found
    found.close()


def otlp_points(request: Any) -> dict[str, list[Any]]:
    """Metric name -> its data points, from an ExportMetricsServiceRequest."""
    out: dict[str, list[Any]] = {}
    for rm in request.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                out[m.name] = [(kind, m.unit, p) for p in getattr(m, kind).data_points]
    return out


def attributes(point: Any) -> dict[str, str]:
    return {a.key: a.value.string_value for a in point.attributes}


def test_otlp_export_over_http_protobuf_carries_what_happened(client: Client, r: Any, receiver: Receiver) -> None:
    run_real_jobs(client, r)
    export = otlp.from_environment()
    assert export is not None and export.export()
    [(path, headers, _)] = receiver.received
    assert path == "/v1/metrics" and headers["content-type"] == "application/x-protobuf"
    assert headers["x-scope"] == "jobs"  # OTEL_EXPORTER_OTLP_HEADERS reached the request
    request = receiver.request()
    service = {a.key: a.value.string_value for a in request.resource_metrics[0].resource.attributes}
    assert service["service.name"] == "jobconsole"
    points = otlp_points(request)

    def find(name: str, **labels: str) -> Any:
        [(kind, unit, point)] = [(k, u, p) for k, u, p in points[name] if labels.items() <= attributes(p).items()]
        return kind, unit, point

    kind, unit, point = find("tasks_processed", task="examples.fail", status="failed")
    assert kind == "sum" and point.as_int == 3 and unit == "1"
    midnight = client.queries.now_ms() // 86_400_000 * 86_400 * 10**9
    assert point.start_time_unix_nano == midnight and point.time_unix_nano > midnight
    assert find("tasks_dead_lettered", task="examples.fail")[2].as_int == 1
    assert find("jobs_submitted_total", type="examples.echo")[2].as_int == 3
    kind, unit, point = find("execution_time", task="examples.echo", status="completed")
    assert kind == "histogram" and unit == "ms" and point.count == 3 and not point.HasField("sum")
    assert sum(point.bucket_counts) == 3 and list(point.explicit_bounds[:3]) == [0.0, 1.0, 3.0]
    assert len(point.bucket_counts) == len(point.explicit_bounds) + 1
    kind, unit, point = find("job_duration_seconds", type="examples.fail")
    assert unit == "s" and point.count == 3 and point.HasField("sum") and point.explicit_bounds[1] == 0.001
    kind, _, point = find("jobconsole_queue_jobs", queue="examples.fail", state="dead")
    assert kind == "gauge" and point.as_int == 1


def test_the_mirror_leader_exports_as_a_chore(client: Client, r: Any, receiver: Receiver) -> None:
    run_real_jobs(client, r)
    chores = leader_chores(cast(Leadership, SimpleNamespace(leader=True)))
    assert "OpenTelemetry metrics export" in [c.name for c in chores.chores]
    chores.run_due()  # wakes the export thread and returns
    wait_for(lambda: receiver.received, timeout=20)
    assert otlp_points(receiver.request())["tasks_selected"]


def test_no_export_unless_the_environment_asks_for_one(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert otlp.wanted()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not otlp.wanted() and otlp.from_environment() is None
    monkeypatch.delenv("OTEL_SDK_DISABLED")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    assert not otlp.wanted()
    monkeypatch.delenv("OTEL_METRICS_EXPORTER")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    assert not otlp.wanted()
    assert "OpenTelemetry metrics export" not in [
        c.name for c in leader_chores(cast(Leadership, SimpleNamespace(leader=True))).chores
    ]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", f"{receiver.url}/v1/metrics")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with caplog.at_level("WARNING"):
        assert otlp.from_environment() is None
    assert "'http/json' is not supported" in caplog.text
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "15000")
    assert otlp.interval() == 15.0


def test_a_collector_that_refuses_is_a_failed_export_not_an_error(client: Client, monkeypatch: Any) -> None:
    refusing = Receiver(status=400)
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", refusing.url)
        export = otlp.from_environment()
        assert export is not None and export.export() is False
        assert len(refusing.received) == 1
    finally:
        refusing.close()
