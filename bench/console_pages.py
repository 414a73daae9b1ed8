"""Console pages at scale (issue 17): the server time, rows and size of every console page with 1,000,000 waiting
jobs and 100,000 dead letters in Redis and mirrored into the database.

    .venv/bin/python bench/console_pages.py                  # load once (about 10 min), then measure
    .venv/bin/python bench/console_pages.py --reload         # load again from scratch
    .venv/bin/python bench/console_pages.py --pages dead --requests 5 --explain --profile "dead letters, all"
    .venv/bin/python bench/console_pages.py --database-url postgres://user:pw@host/db   # flushed on load!

Load phase (skipped while --data-dir holds a complete load of the same size and database): a private
redis-server keeps its data in --data-dir as an RDB file; the database is a fresh SQLite file there (the shipped
default) or --database-url. 1,000,000 examples.echo jobs wait in a queue no worker serves; 100,000 jobs die
(examples.fail and examples.flaky with max_retries=0, run by `runworker --burst --no-mirror`, and a killed worker's
jobs dead-lettered by the recoverer); a killed worker leaves stalled running jobs; some jobs complete, some are
scheduled; `runmirror --burst` mirrors it all; 5,000 audit records. Each step's time is printed and kept.

Measure phase: Django in this process (project.settings, DEBUG on), a logged-in superuser through
django.test.Client, one live worker running a few long jobs. Every console route (from dashboards.urls) is
requested, with the filtered variants operators use, the htmx polls each page makes, and pages several cursor
links deep; --warmup requests, then --requests timed ones each. Per page: p50, p95 and max server time (the
request through Django's handler, body included), rows (`<tr` in the body), size, SQL queries and their time.
Pages over 150 ms at p95 or 500 rows are flagged. A table on stdout; JSON lines in var/bench/console_pages.json.
Redis is stopped without saving, so a measure run leaves the loaded data as it was.
"""

import argparse
import cProfile
import html
import io
import json
import logging
import math
import os
import platform
import pstats
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urljoin

from console_data import (
    BACKLOG,
    IMPORTS,
    PAYMENTS,
    ROOT,
    SLOW,
    STALLED,
    UNIQUE_EVERY,
    Loaded,
    RedisProcess,
    bench_env,
    clear,
    database_label,
    load,
    log,
    manage,
    unique_key,
    waiting_params,
)

SLOW_MS = 150.0  # issue 17: every page under 150 ms at p95
MAX_ROWS = 500  # ... and no page sends more than a few hundred rows
LIVE_THREADS = 4  # the live worker of the measure phase runs this many long jobs
ROW = re.compile(rb"<tr[\s>]")
TAG = re.compile(r"<[^>]+>")
ATTR = re.compile(r'([\w-]+)="([^"]*)"')
CURSOR_LINK = re.compile(r'href="([^"]*[?&](?:amp;)?cursor=[^"]*)"')
RESULTS_FILE = ROOT / "var" / "bench" / "console_pages.json"


@dataclass
class Variant:
    label: str
    url: str  # path and query string
    htmx: bool = False
    kind: str = "page"  # page, partial (an htmx poll) or download (exempt from the page limits)
    deep: int = 0  # follow the page's last cursor link this many times first
    note: str = ""


@dataclass
class Result:
    label: str
    url: str
    kind: str
    status: int
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    max_ms: float = 0.0
    rows: int = 0
    bytes: int = 0
    cpu_ms: float = 0.0  # p50 of this process's CPU time per request (what waiting for a busy CPU leaves out)
    queries: int = 0
    sql_ms: float = 0.0  # p50 of the SQL time the database reported per request
    flags: list[str] = field(default_factory=list)
    note: str = ""


@dataclass
class Facts:
    """Real values from the data set for routes with arguments and for the filters."""

    dead_job: str
    waiting_job: str
    running_job: str
    completed_job: str
    fingerprint: str  # the biggest group's
    task: str
    customer: str
    unique_key: str
    text: str  # in dead-letter messages
    bulk: int  # a bulk resubmit of every open dead letter (frozen, not run: no system worker here)


# --- what to request ----------------------------------------------------------------------------------------


def console_routes() -> dict[str, list[str]]:
    """Every named route of the dashboards app, with its argument names."""
    from django.urls import URLPattern, URLResolver, get_resolver

    def walk(patterns: list[Any], namespace: str | None) -> Iterator[URLPattern]:
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, p.namespace or namespace)
            elif namespace == "dashboards" and p.name:
                yield p

    routes: dict[str, list[str]] = {}
    for p in walk(get_resolver().url_patterns, None):
        if p.name is None:  # walk yields named patterns only
            continue
        converters = getattr(p.pattern, "converters", None)
        routes[p.name] = list(converters) if converters is not None else list(p.pattern.regex.groupindex)
    return routes


def gather_facts() -> Facts:
    from django.db.models import Count

    from jobconsole.core import JobState
    from jobconsole.engine import get_client
    from jobconsole.models import DeadLetter

    queries = get_client().queries
    top = (
        DeadLetter.objects.order_by()
        .values("fingerprint")
        .annotate(n=Count("id"))
        .order_by("-n")
        .values_list("fingerprint", flat=True)
        .first()
    )
    dead = DeadLetter.objects.filter(queue=PAYMENTS).order_by("-died_at").values_list("job_id", flat=True).first()
    [running] = queries.jobs.ids_in(SLOW, JobState.RUNNING, limit=1) or [""]
    [completed] = queries.jobs.ids_in("bench.done", JobState.COMPLETED, limit=1) or [""]
    i = 4_321 * UNIQUE_EVERY
    return Facts(
        bulk=every_dead_letter_operation(),
        dead_job=dead or "",
        waiting_job=queries.jobs.ids_in(BACKLOG, JobState.QUEUED, limit=1)[0],
        running_job=running,
        completed_job=completed,
        fingerprint=top or "",
        task="examples.fail",
        customer=str(waiting_params(1234)["customer"]),
        unique_key=unique_key(i),
        text="card declined",
    )


def every_dead_letter_operation() -> int:
    """The biggest operation an operator starts, for its detail page and progress poll: a resubmit of every
    open dead letter, frozen once into the database (kept between runs; its system job goes with Redis's
    unsaved state at the end of a run, so it stays pending)."""
    from django.contrib.auth import get_user_model

    from jobconsole.bulk import operations
    from jobconsole.models import BulkOperation, DeadLetter

    existing = BulkOperation.objects.filter(kind="resubmit_deadletters").order_by("-total").first()
    if existing is not None and existing.total >= DeadLetter.objects.count() // 2:
        return existing.pk
    user = get_user_model().objects.filter(username="bench").first()
    user = user or get_user_model().objects.create_superuser("bench")
    started = time.monotonic()
    operation = operations.start_from_rows(
        "resubmit_deadletters", DeadLetter.objects.all(), user=user, description={"filter": "every dead letter"}
    )
    log(f"froze a bulk resubmit of {operation.total:,} dead letters: {time.monotonic() - started:.1f} s")
    return operation.pk


def planned(routes: dict[str, list[str]], f: Facts) -> tuple[list[Variant], list[str]]:
    """The requests to time: for the routes this checkout has, the variants operators use; any other route once
    with the generic argument values. Returns the variants and notes on routes left out."""
    from django.urls import NoReverseMatch, reverse

    def url(route: str, query: dict[str, Any] | None = None, **kwargs: Any) -> str:
        return reverse(f"dashboards:{route}", kwargs=kwargs or None) + ("?" + urlencode(query) if query else "")

    plans: dict[str, Callable[[], list[Variant]]] = {
        "overview": lambda: [
            Variant("overview", url("overview")),
            Variant("overview, last day", url("overview", {"range": "day"})),
            Variant("overview, last week", url("overview", {"range": "week"})),
        ],
        "queues": lambda: [Variant("queues", url("queues"))],
        "queue": lambda: [
            Variant("queue: waiting (the backlog)", url("queue", name=BACKLOG)),
            Variant("queue: waiting, 6th page", url("queue", name=BACKLOG), deep=5),
            Variant("queue: dead", url("queue", {"state": "dead"}, name=PAYMENTS)),
            Variant("queue: running (stalled)", url("queue", {"state": "running"}, name=SLOW)),
        ],
        "dead_letters": lambda: [
            Variant("dead letters, all", url("dead_letters")),
            Variant("dead letters, 6th page", url("dead_letters"), deep=5),
            Variant("dead letters by fingerprint", url("dead_letters", {"fingerprint": f.fingerprint})),
            Variant("dead letters by text", url("dead_letters", {"q": f.text})),
            Variant("dead letters by queue", url("dead_letters", {"queue": IMPORTS})),
            Variant("dead letters by task", url("dead_letters", {"task": "examples.flaky"})),
            Variant("dead letters, all statuses", url("dead_letters", {"status": "all"})),
        ],
        "dead_letters_export": lambda: [
            Variant("export CSV, every dead letter", url("dead_letters_export", fmt="csv"), kind="download"),
            Variant(
                "export JSON, by fingerprint",
                url("dead_letters_export", {"fingerprint": f.fingerprint}, fmt="json"),
                kind="download",
            ),
        ],
        "workers": lambda: [Variant("workers", url("workers"))],
        "audit": lambda: [
            Variant("audit log", url("audit")),
            Variant("audit log, 6th page", url("audit"), deep=5),
            Variant("audit log by action", url("audit", {"action": "resubmit"})),
        ],
        "healthz": lambda: [Variant("healthz", url("healthz"))],
        # Pages of the other branches (`pages`, `metrics`, `bulk`), measured once their routes exist.
        "jobs": lambda: [
            Variant("jobs", url("jobs")),
            Variant("jobs, 6th page", url("jobs"), deep=5),
            Variant("jobs by state queued", url("jobs", {"state": "queued"})),
            Variant("jobs by state dead", url("jobs", {"state": "dead"})),
            Variant("jobs by state running", url("jobs", {"state": "running"})),
            Variant("jobs by queue", url("jobs", {"queue": BACKLOG})),
            Variant("jobs by queue and state", url("jobs", {"queue": PAYMENTS, "state": "dead"})),
            Variant("jobs by task", url("jobs", {"task": f.task})),
            Variant("jobs by parameter text", url("jobs", {"text": f.customer})),
            Variant("jobs by parameter text and queue", url("jobs", {"text": f.customer, "queue": BACKLOG})),
            Variant("jobs by unique key", url("jobs", {"unique_key": f.unique_key})),
            Variant("jobs by id", url("jobs", {"id": f.waiting_job})),
        ],
        "job": lambda: [
            Variant("job detail, dead", url("job", job_id=f.dead_job)),
            Variant("job detail, waiting", url("job", job_id=f.waiting_job)),
            Variant("job detail, running", url("job", job_id=f.running_job)),
        ],
        "running": lambda: [Variant("running", url("running"))],
        "scheduled": lambda: [Variant("scheduled", url("scheduled"))],
        "tasks": lambda: [Variant("tasks", url("tasks")), Variant("tasks, last week", url("tasks", {"range": "week"}))],
        "task": lambda: [
            Variant("task: the failing one", url("task", name=f.task)),
            Variant("task: the 1M one, last week", url("task", {"range": "week"}, name="examples.echo")),
        ],
        "bulk_list": lambda: [Variant("bulk operations", url("bulk_list"))],
        "bulk_detail": lambda: [Variant("bulk operation of 100k", url("bulk_detail", pk=f.bulk))],
        "bulk_progress": lambda: [Variant("bulk progress poll", url("bulk_progress", pk=f.bulk))],
        "bulk_preview": lambda: [
            Variant("bulk preview, resubmit every dead letter", url("bulk_preview", {"kind": "resubmit"})),
            Variant(
                "bulk preview, purge one fingerprint",
                url("bulk_preview", {"kind": "purge", "fingerprint": f.fingerprint}),
            ),
        ],
    }
    generic = {
        "name": BACKLOG,
        "queue": BACKLOG,
        "job_id": f.dead_job,
        "id": f.dead_job,
        "pk": None,
        "fingerprint": f.fingerprint,
        "task": f.task,
        "fmt": "csv",
    }
    out: list[Variant] = []
    notes: list[str] = []
    for name, args in routes.items():
        if name in plans:
            try:
                out += plans[name]()
                continue
            except NoReverseMatch as exc:  # its arguments are not the planned ones: request it generically
                notes.append(f"{name}: planned variants do not fit ({exc}); requested generically")
        values: dict[str, Any] = {a: generic.get(a) for a in args}
        if any(v is None for v in values.values()):
            notes.append(f"{name}: no value for {', '.join(a for a, v in values.items() if v is None)}; left out")
            continue
        out.append(Variant(name.replace("_", " "), url(name, **values)))
    return out, notes


# --- timing one variant -------------------------------------------------------------------------------------


@dataclass
class Response:
    status: int
    body: bytes
    seconds: float
    cpu_seconds: float  # this thread's (the request runs in it; Redis's CPU is not in it)
    queries: list[dict[str, str]]


def fetch(client: Any, url: str, htmx: bool) -> Response:
    from django.db import connection

    headers = {"HX-Request": "true"} if htmx else {}
    started, cpu = time.perf_counter(), time.thread_time()
    response = client.get(url, headers=headers)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    seconds, cpu = time.perf_counter() - started, time.thread_time() - cpu
    return Response(response.status_code, body, seconds, cpu, list(connection.queries))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def htmx_polls(body: bytes) -> list[str]:
    """The URLs the page polls (elements with hx-get and hx-trigger="every ...")."""
    found = []
    for tag in TAG.findall(body.decode("utf-8", "replace")):
        attrs = dict(ATTR.findall(tag))
        if "hx-get" in attrs and "every" in attrs.get("hx-trigger", ""):
            found.append(html.unescape(attrs["hx-get"]))
    return list(dict.fromkeys(found))


def follow_cursor(client: Any, variant: Variant) -> str | None:
    """The URL `variant.deep` pages in: the last cursor link of each page, followed."""
    url = variant.url
    for _ in range(variant.deep):
        links = CURSOR_LINK.findall(fetch(client, url, False).body.decode("utf-8", "replace"))
        if not links:
            return None
        url = urljoin(url, html.unescape(links[-1]))
    return url


def measure(client: Any, variant: Variant, warmup: int, requests: int) -> tuple[Result, bytes]:
    if variant.kind == "download":
        warmup, requests = min(warmup, 1), min(requests, 3)
    for _ in range(warmup):
        first = fetch(client, variant.url, variant.htmx)
    result = Result(variant.label, variant.url, variant.kind, first.status, note=variant.note)
    if first.status == 405:
        result.note = "POST only: not timed"
        return result, first.body
    samples = [fetch(client, variant.url, variant.htmx) for _ in range(requests)]
    times = [s.seconds * 1000 for s in samples]
    last = samples[-1]
    result.status = max(s.status for s in samples)
    result.p50_ms, result.p95_ms, result.max_ms = percentile(times, 50), percentile(times, 95), max(times)
    result.cpu_ms = percentile([s.cpu_seconds * 1000 for s in samples], 50)
    result.rows = len(ROW.findall(last.body))
    result.bytes = len(last.body)
    result.queries = len(last.queries)
    result.sql_ms = percentile([sum(float(q["time"]) for q in s.queries) * 1000 for s in samples], 50)
    if result.status != 200:
        result.flags.append(f"HTTP {result.status}")
    if variant.kind != "download":
        if result.p95_ms > SLOW_MS:
            result.flags.append("SLOW")
        if result.rows > MAX_ROWS:
            result.flags.append("ROWS")
    return result, last.body


def measure_all(client: Any, variants: list[Variant], warmup: int, requests: int) -> list[Result]:
    from tqdm import tqdm

    results: list[Result] = []
    seen_polls: set[tuple[str, str]] = set()
    queue = list(variants)
    with tqdm(total=len(queue), unit="page", file=sys.stderr, leave=False) as bar:
        while queue:
            variant = queue.pop(0)
            bar.set_description(variant.label[:30])
            if variant.deep:
                deep_url = follow_cursor(client, variant)
                if deep_url is None:
                    results.append(Result(variant.label, variant.url, variant.kind, 0, note="no cursor link found"))
                    bar.update()
                    continue
                variant.url = deep_url
            result, body = measure(client, variant, warmup, requests)
            results.append(result)
            if variant.kind == "page" and result.status == 200 and not variant.deep:
                polls = [u for u in htmx_polls(body) if (u, variant.label) not in seen_polls]
                for poll in polls:
                    seen_polls.add((poll, variant.label))
                    queue.insert(
                        0,
                        Variant(f"{variant.label} [htmx poll]", urljoin(variant.url, poll), htmx=True, kind="partial"),
                    )
                bar.total = (bar.total or 0) + len(polls)
            bar.update()
    return results


# --- looking closer: EXPLAIN and cProfile -------------------------------------------------------------------


def explain(client: Any, result: Result, top: int = 3) -> str:
    from django.db import connection

    response = fetch(client, result.url, result.kind == "partial")
    sql_ms = sum(float(q["time"]) for q in response.queries) * 1000
    lines = [f"## {result.label}  ({result.url}): {len(response.queries)} queries, {sql_ms:.0f} ms of "
             f"{response.seconds * 1000:.0f} ms"]  # fmt: skip
    slowest = sorted(response.queries, key=lambda q: float(q["time"]), reverse=True)[:top]
    slowest = [q for q in slowest if float(q["time"]) >= 0.002]  # the session and user look-ups are not it
    if not slowest:
        lines.append("- no query took 2 ms or more: the time is outside the database (see --profile)")
    for q in slowest:
        sql = q["sql"]
        lines.append(f"- {float(q['time']) * 1000:.1f} ms: {sql[:600]}{' ...' if len(sql) > 600 else ''}")
        prefix = "EXPLAIN QUERY PLAN " if connection.vendor == "sqlite" else "EXPLAIN ANALYZE "
        try:
            with connection.cursor() as cursor:
                cursor.execute(prefix + sql)
                plan = cursor.fetchall()
            lines += ["    " + " | ".join(str(c) for c in row) for row in plan]
        except Exception as exc:  # noqa: BLE001  (a query whose logged text does not run again as is)
            lines.append(f"    (no plan: {exc})")
    return "\n".join(lines)


def profile(client: Any, result: Result, top: int = 30) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    fetch(client, result.url, result.kind == "partial")
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(r"jobconsole|dashboards|redis|db/models|template", top)
    stats.sort_stats("tottime").print_stats(top)
    return f"## cProfile of {result.label} ({result.url})\n{out.getvalue()}"


# --- report -------------------------------------------------------------------------------------------------


def table(results: list[Result]) -> str:
    header = (
        f"{'page':<44} {'status':>6} {'p50':>7} {'p95':>7} {'max':>7} {'cpu':>6} {'rows':>5} {'KB':>7} "
        f"{'SQL':>4} {'SQL ms':>6}  flags"
    )
    lines = [header, "-" * len(header)]
    for r in results:
        if r.note and not r.p50_ms:
            lines.append(f"{r.label[:44]:<44} {r.status or '':>6}  {r.note}")
            continue
        lines.append(
            f"{r.label[:44]:<44} {r.status:>6} {r.p50_ms:>7.1f} {r.p95_ms:>7.1f} {r.max_ms:>7.1f} {r.cpu_ms:>6.1f} "
            f"{r.rows:>5} {r.bytes / 1024:>7.1f} {r.queries:>4} {r.sql_ms:>6.1f}  {' '.join(r.flags)}"
            + (" (download: no page limits)" if r.kind == "download" else "")
        )
    return "\n".join(lines)


def machine() -> str:
    model = ""
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    return f"{platform.node()}: {os.cpu_count()} cores {model}".strip()


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip()


def write_json(path: Path, meta: dict[str, Any], results: list[Result]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"meta": meta})] + [json.dumps(asdict(r)) for r in results]
    path.write_text("\n".join(lines) + "\n")
    log(f"wrote {path}")


# --- main ---------------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--data-dir",
        default=str(ROOT / "var" / "bench" / "console"),
        help="where the loaded Redis (RDB file) and SQLite database are kept between runs",
    )
    p.add_argument("--reload", action="store_true", help="load the data set again even if --data-dir has it")
    p.add_argument("--database-url", default="", help="a database to load into instead of SQLite (FLUSHED!)")
    p.add_argument("--jobs", type=int, default=1_000_000, help="waiting jobs (default 1,000,000)")
    p.add_argument("--dead", type=int, default=100_000, help="dead letters (default 100,000)")
    p.add_argument("--workers", type=int, default=2, help="burst worker processes making the dead letters")
    p.add_argument("--requests", type=int, default=20, help="timed requests per page (downloads: at most 3)")
    p.add_argument("--warmup", type=int, default=2, help="untimed requests per page first (at least 1)")
    p.add_argument("--pages", default="", help="only pages whose label contains one of these (comma-separated)")
    p.add_argument("--load-only", action="store_true", help="load (if needed) and stop")
    p.add_argument("--explain", action="store_true", help="EXPLAIN the slowest queries of the flagged pages")
    p.add_argument("--profile", default="", help="cProfile one request of the pages whose label contains this")
    p.add_argument("--json", default=str(RESULTS_FILE), help="where the JSON lines go")
    p.add_argument("--redis-server", default=shutil.which("redis-server") or "/usr/bin/redis-server")
    args = p.parse_args()
    args.warmup = max(1, args.warmup)
    return args


def main() -> int:
    args = parse_args()
    data_dir = Path(args.data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    label = database_label(args.database_url, data_dir)
    loaded = None if args.reload else Loaded.read(data_dir)
    if loaded is not None and (loaded.database, loaded.jobs, loaded.dead) != (label, args.jobs, args.dead):
        log(f"{data_dir} holds {loaded.jobs:,} jobs and {loaded.dead:,} dead in {loaded.database}: loading again")
        loaded = None
    if loaded is None:
        clear(data_dir)
    redis = RedisProcess(args.redis_server, data_dir)
    started = time.monotonic()
    redis.start()
    start_s = time.monotonic() - started
    env = bench_env(data_dir, redis.url, args.database_url)
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    logging.getLogger("django.request").setLevel(logging.ERROR)  # not a line per 405 of a POST-only route
    from jobconsole.engine import get_client, get_redis

    worker = None
    try:
        if loaded is None:
            loaded = load(data_dir, env, args.jobs, args.dead, args.workers, args.database_url)
            loaded.database = label
            started = time.monotonic()
            redis.stop(save=True)
            redis.start(port=redis.port)
            get_redis.cache_clear()  # fresh connections to the restarted server
            get_client.cache_clear()
            loaded.steps["save Redis (RDB) and restart it"] = round(time.monotonic() - started, 1)
            loaded.save(data_dir)
        else:
            log(f"reusing the data set loaded {loaded.loaded_at} (Redis started from its RDB in {start_s:.1f} s)")
        if args.load_only:
            return 0
        worker = manage(
            # No system worker: it would run the frozen bulk operation and change the data set.
            [
                "runworker",
                "--queues",
                SLOW,
                "--no-mirror",
                "--no-maintenance",
                "--no-system-worker",
                "--concurrency",
                str(LIVE_THREADS),
            ],
            env,
            data_dir / "logs" / "live-worker.log",
        )
        wait_for_live_worker(worker)
        return measure_phase(args, loaded, start_s)
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=60)
        redis.stop(save=False)


def wait_for_live_worker(worker: subprocess.Popen[bytes]) -> None:
    from jobconsole.engine import get_client

    deadline = time.monotonic() + 60
    while get_client().queries.queues.counts(SLOW).running < STALLED + LIVE_THREADS:
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the live worker did not start its jobs")
        time.sleep(0.2)


def measure_phase(args: argparse.Namespace, loaded: Loaded, redis_start_s: float) -> int:
    import django
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from jobconsole.engine import get_redis
    from jobconsole.metrics import rollup, sampling

    # What the mirror leader's chores keep current in a deployment (every METRICS.ROLLUP_EVERY and
    # SAMPLE_EVERY seconds): the closed minutes copied into the database and a depth sample, so the pages read
    # what they read in production, not a walk of counters no rollup has flushed.
    started = time.monotonic()
    rolled = rollup.rollup()
    sampling.sample()
    log(f"metrics rollup ({rolled:,} rows) and a depth sample: {time.monotonic() - started:.1f} s")
    user_model = get_user_model()
    user = user_model.objects.filter(username="bench").first() or user_model.objects.create_superuser("bench")
    client = Client()
    client.force_login(user)

    facts = gather_facts()
    variants, notes = planned(console_routes(), facts)
    if args.pages:
        wanted = [w.strip() for w in args.pages.split(",") if w.strip()]
        variants = [v for v in variants if any(w in v.label for w in wanted)]
    load_before = os.getloadavg()[0]
    results = measure_all(client, variants, args.warmup, args.requests)
    load_after = os.getloadavg()[0]

    redis_version = str(get_redis().info("server").get("redis_version", ""))
    meta = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "commit": commit(),
        "command": " ".join(["bench/console_pages.py", *sys.argv[1:]]),
        "database": connection.vendor,
        "django": django.get_version(),
        "redis": redis_version,
        "python": platform.python_version(),
        "jobs": loaded.jobs,
        "dead": loaded.dead,
        "loaded_at": loaded.loaded_at,
        "load_steps_s": loaded.steps,
        "redis_start_s": round(redis_start_s, 1),
        "requests": args.requests,
        "warmup": args.warmup,
        "load_average": [round(load_before, 1), round(load_after, 1)],
        "slow_ms": SLOW_MS,
        "max_rows": MAX_ROWS,
        "notes": notes,
    }
    print(
        f"Console pages with {loaded.jobs:,} waiting jobs and {loaded.dead:,} dead letters ({connection.vendor}, "
        f"loaded {loaded.loaded_at}); {args.requests} timed requests per page after {args.warmup} warm-up; "
        f"server time in ms (cpu: this process's CPU time, p50); {meta['machine']}; load average "
        f"{load_before:.1f} before, {load_after:.1f} after; commit {meta['commit']}"
    )
    print("load steps: " + "; ".join(f"{name} {s:.1f} s" for name, s in loaded.steps.items()))
    print(table(results))
    for note in notes:
        print(f"note: {note}")
    flagged = [r for r in results if r.flags]
    print(f"{len(flagged)} of {len(results)} flagged (p95 over {SLOW_MS:.0f} ms, over {MAX_ROWS} rows, or not 200)")
    if args.explain:
        for r in flagged:
            print("\n" + explain(client, r))
    if args.profile:
        for r in results:
            if args.profile in r.label and r.p50_ms:
                print("\n" + profile(client, r))
    write_json(Path(args.json), meta, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
