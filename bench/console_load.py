"""Console load time in the browser (issues 28 and 30): every console page opened by an operator in Debian's
chromium, cold (a new browser context: empty cache) and warm (a reload in the same context).

    .venv/bin/python bench/console_load.py                       # start a stack as `make run DEMO=1` does, measure
    .venv/bin/python bench/console_load.py --runs 20 --pages overview,tasks
    .venv/bin/python bench/console_load.py --data-dir var/bench/console   # at bench/console_pages.py's scale
    .venv/bin/python bench/console_load.py --url http://127.0.0.1:8000 --user admin --password ...   # a running one

The stack: scripts/run_stack.py itself (gunicorn with DEBUG on, collectstatic at start, a worker, the system
worker, the mirror and the demo producer) on a free port with a fresh var directory; the benchmark waits
--settle seconds for the demo to give the charts some data, takes the admin password `ensureadmin` prints, and
stops the stack with SIGINT (Ctrl-C) at the end.

With --data-dir: the data set of bench/console_data.py (1,000,000 waiting jobs, 100,000 dead letters; loaded by
`bench/console_pages.py --load-only --data-dir DIR [--database-url URL]` first): its Redis started from the RDB
file, the mirror leader's metric chores run once (as console_pages.py does), gunicorn as run_stack.py starts it
(DEBUG on) and a live worker of the slow queue; Redis is stopped without saving, so the data set stays as loaded.

Pages: the sidebar's, and the detail pages an operator opens from them (a task, a job, a dead letter's job, a
queue, a workflow, a bulk operation): the first such link on the list page.

Per page and run: a new context with the logged-in session's cookies opens the page (cold), then reloads it
(warm). Measured in the page, from the navigation's start: the load event's end, and the moment every chart
(`.chart[data-figure]`) holds plotly's `.main-svg` (a MutationObserver records it). Also the bytes the page's
requests transferred (the navigation and resource timing entries' transferSize: 0 for what came from the cache).
Median and p90 over --runs runs per page; a table on stdout, JSON lines in var/bench/console_load.json.
"""

import argparse
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
RESULTS_FILE = ROOT / "var" / "bench" / "console_load.json"
CHROMIUM = "/usr/bin/chromium"
COLD_LIMIT_MS = 1000.0  # issue 28: any page under 1 s cold on loopback
WARM_LIMIT_MS = 300.0  # ... and under 300 ms warm
PASSWORD_LINE = re.compile(r"user: (\S+)\s+password: (\S+)")
# Detail pages: (name, the sidebar page listing them, the link's pattern); the first such link is measured.
DETAILS = [
    ("task detail", "tasks", r"/tasks/[^/?#]+/$"),
    ("job detail", "jobs", r"/jobs/[^/?#]+/$"),
    ("dead letter's job", "dead letters", r"/jobs/[^/?#]+/$"),
    ("queue detail", "queues", r"/queues/[^/?#]+/$"),
    ("workflow detail", "workflows", r"/workflows/[^/?#]+/$"),
    ("bulk operation", "bulk operations", r"/bulk/\d+/$"),
]

# Records in the page when every chart has been drawn (performance.now(): ms since the navigation started).
CHARTS_OBSERVER = """
(() => {
  const check = () => {
    const charts = document.querySelectorAll('.chart[data-figure]');
    if (charts.length && [...charts].every((c) => c.querySelector('.main-svg'))) {
      window.__chartsDrawn = performance.now();
      observer.disconnect();
    }
  };
  const observer = new MutationObserver(check);
  observer.observe(document, { childList: true, subtree: true });
})();
"""
TIMINGS = """
() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const resources = performance.getEntriesByType('resource');
  const paint = performance.getEntriesByName('first-contentful-paint')[0];
  return {
    paint: paint ? paint.startTime : null,
    load: nav.loadEventEnd,
    dcl: nav.domContentLoadedEventEnd,
    charts: window.__chartsDrawn ?? null,
    chartCount: document.querySelectorAll('.chart[data-figure]').length,
    bytes: nav.transferSize + resources.reduce((sum, r) => sum + r.transferSize, 0),
    requests: 1 + resources.length,
  };
}
"""


def log(message: str) -> None:
    print(f"[console_load] {message}", file=sys.stderr, flush=True)


# --- the stack ------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Stack:
    """scripts/run_stack.py as `make run DEMO=1` starts it, on a free port and a fresh var directory."""

    def __init__(self, workers: int) -> None:
        self.port = free_port()
        self.var = Path(tempfile.mkdtemp(prefix="console_load."))
        env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL", "SECRET_KEY"}}
        env.update(PORT=str(self.port), DEMO="1", WORKERS=str(workers), JOBCONSOLE_VAR_DIR=str(self.var))
        self.proc = subprocess.Popen(
            [sys.executable, "scripts/run_stack.py"], cwd=ROOT, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self.credentials: tuple[str, str] | None = None
        threading.Thread(target=self._read, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if self.credentials is None and (found := PASSWORD_LINE.search(line)):
                self.credentials = (found[1], found[2])

    def wait_ready(self, timeout: float = 180) -> tuple[str, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                sys.exit("run_stack.py exited:\n" + "".join(self.lines[-40:]))
            if self.credentials is not None:
                try:
                    urllib.request.urlopen(self.url + "/healthz", timeout=2).read()
                    return self.credentials
                except OSError:
                    pass
            time.sleep(0.3)
        sys.exit("the stack did not start in time:\n" + "".join(self.lines[-40:]))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # Ctrl-C: the supervisor stops every process in order
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.var, ignore_errors=True)  # its database, Redis data and collected static files


class DataStack:
    """gunicorn (as run_stack.py starts it) on the data set of bench/console_data.py in `data_dir`, with a live
    worker of its slow queue; its Redis started from the RDB file and stopped without saving."""

    def __init__(self, data_dir: Path, database_url: str) -> None:
        sys.path.insert(0, str(ROOT / "bench"))
        import console_data

        loaded = console_data.Loaded.read(data_dir)
        if loaded is None:
            sys.exit(f"{data_dir} holds no loaded data set: bench/console_pages.py --load-only --data-dir {data_dir}")
        if loaded.database != console_data.database_label(database_url, data_dir):
            sys.exit(f"{data_dir} was loaded into {loaded.database}: pass the same --database-url")
        self.loaded = loaded
        self.port = free_port()
        self.redis = console_data.RedisProcess(shutil.which("redis-server") or "/usr/bin/redis-server", data_dir)
        self.redis.start()
        self.env = {**console_data.bench_env(data_dir, self.redis.url, database_url), "PYTHONUNBUFFERED": "1"}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.credentials = self._prepare(data_dir)
        logs = data_dir / "logs"
        worker = ["runworker", "--queues", console_data.SLOW, "--no-mirror", "--no-maintenance",
                  "--no-system-worker", "--concurrency", "4"]  # fmt: skip
        self.procs.append(console_data.manage(worker, self.env, logs / "live-worker.log"))
        web = [sys.executable, "-m", "gunicorn", "project.wsgi", "--bind", f"127.0.0.1:{self.port}", "--workers",
               "2", "--threads", "4", "--no-control-socket"]  # fmt: skip
        with open(logs / "web.log", "ab") as out:
            self.procs.append(subprocess.Popen(web, cwd=ROOT, env={**os.environ, **self.env}, stdout=out, stderr=out))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _prepare(self, data_dir: Path) -> tuple[str, str]:
        """collectstatic, the metric chores a deployment's mirror leader runs, and an operator account."""
        script = (
            "from django.contrib.auth import get_user_model\n"
            "from jobconsole.metrics import rollup, sampling\n"
            "rollup.rollup(); sampling.sample()\n"
            "User = get_user_model()\n"
            "user = User.objects.filter(username='bench').first() or User.objects.create_superuser('bench')\n"
            "user.set_password('bench-console-load'); user.save()\n"
        )
        for args in (["collectstatic", "--noinput", "-v", "0"], ["shell", "-c", script]):
            done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env={**os.environ, **self.env},
                                  capture_output=True, text=True)  # fmt: skip
            if done.returncode != 0:
                self.stop()
                sys.exit(f"manage.py {args[0]} failed:\n{done.stdout}{done.stderr}")
        return "bench", "bench-console-load"

    def wait_ready(self, timeout: float = 120) -> tuple[str, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.url + "/healthz", timeout=2).read()
                return self.credentials
            except OSError:
                time.sleep(0.3)
        self.stop()
        sys.exit("gunicorn did not answer in time")

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.redis.stop(save=False)


# --- measuring ------------------------------------------------------------------------------------------------


@dataclass
class Sample:
    paint_ms: float | None  # first contentful paint
    load_ms: float
    charts_ms: float | None  # None: a page without charts
    kb: float
    requests: int


@dataclass
class PageResult:
    page: str
    path: str
    cold: list[Sample] = field(default_factory=list)
    warm: list[Sample] = field(default_factory=list)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def log_in(browser: Browser, url: str, user: str, password: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The logged-in session's storage state, and the console's pages (its sidebar's links) by name."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{url}/admin/login/?next=/")
    page.fill("#id_username", user)
    page.fill("#id_password", password)
    with page.expect_navigation():
        page.click("input[type=submit]")
    if page.locator(".sidebar .nav").count() == 0:
        sys.exit(f"logging in as {user} did not reach the console (at {page.url})")
    pages = {}
    for link in page.locator(".sidebar .nav a").all():
        href = link.get_attribute("href") or ""
        if "/admin/" not in href:
            pages[link.inner_text().strip().lower()] = href
    for name, listing, pattern in DETAILS:
        if listing not in pages:
            continue
        page.goto(url + pages[listing], wait_until="domcontentloaded")
        hrefs = page.locator(".content a[href], main a[href]").evaluate_all("(links) => links.map((a) => a.pathname)")
        if found := next((h for h in hrefs if re.search(pattern, h)), None):
            pages[name] = found
        else:
            log(f"{name}: no link on {listing} ({pages[listing]}): not measured")
    state = context.storage_state()
    context.close()
    return dict(state), pages


def measure(page: Page, url: str, reload: bool) -> Sample:
    """One load (or reload) of the page, and its charts drawn if it has any."""
    if reload:
        page.reload(wait_until="load")
    else:
        page.goto(url, wait_until="load")
    if page.evaluate(TIMINGS)["chartCount"]:
        page.wait_for_function("() => window.__chartsDrawn !== undefined", timeout=30_000)
    t = page.evaluate(TIMINGS)
    return Sample(t["paint"], t["load"], t["charts"], t["bytes"] / 1024, t["requests"])


def run(browser: Browser, url: str, state: dict[str, Any], pages: dict[str, str], runs: int) -> list[PageResult]:
    results = {name: PageResult(name, path) for name, path in pages.items()}
    for i in range(runs):
        for name, path in pages.items():
            # A new context has an empty cache (and its own code cache); the session's cookies come along.
            context = browser.new_context(storage_state=state, viewport={"width": 1360, "height": 860})  # type: ignore[arg-type]
            context.add_init_script(CHARTS_OBSERVER)
            page = context.new_page()
            try:
                results[name].cold.append(measure(page, url + path, reload=False))
                results[name].warm.append(measure(page, url + path, reload=True))
            finally:
                context.close()
        log(f"run {i + 1}/{runs} done")
    return list(results.values())


def spread(values: list[float]) -> dict[str, float] | None:
    return {"p50": statistics.median(values), "p90": percentile(values, 90)} if values else None


def summary(samples: list[Sample]) -> dict[str, Any]:
    return {
        "paint": spread([s.paint_ms for s in samples if s.paint_ms is not None]),
        "load": spread([s.load_ms for s in samples]),
        "charts": spread([s.charts_ms for s in samples if s.charts_ms is not None]),
        "kb_p50": statistics.median(s.kb for s in samples),
        "requests": max(s.requests for s in samples),
    }


def fmt(value: dict[str, float] | None) -> str:
    return "—" if value is None else f"{value['p50']:.0f} ({value['p90']:.0f})"


def table(results: list[PageResult]) -> str:
    """Milliseconds from the navigation's start, p50 (p90)."""
    lines = [
        "| Page | Cold: first paint | Cold: load | Cold: charts drawn | Cold kB | Warm: first paint | Warm: load "
        "| Warm: charts drawn | Warm kB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        c, w = summary(r.cold), summary(r.warm)
        cold = f"{fmt(c['paint'])} | {fmt(c['load'])} | {fmt(c['charts'])} | {c['kb_p50']:.0f}"
        warm = f"{fmt(w['paint'])} | {fmt(w['load'])} | {fmt(w['charts'])} | {w['kb_p50']:.0f}"
        lines.append(f"| {r.page} | {cold} | {warm} |")
    return "\n".join(lines)


def verdict(results: list[PageResult]) -> list[str]:
    """Pages past issue 28's limits (the later of load and charts drawn, at p90)."""
    out = []
    for r in results:
        for kind, samples, limit in (("cold", r.cold, COLD_LIMIT_MS), ("warm", r.warm, WARM_LIMIT_MS)):
            s = summary(samples)
            worst = max(s["load"]["p90"], s["charts"]["p90"] if s["charts"] else 0)
            if worst > limit:
                out.append(f"{r.page}: {kind} p90 {worst:.0f} ms > {limit:.0f} ms")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="cold and warm loads per page (default 10)")
    parser.add_argument("--pages", default="", help="comma-separated page names as the sidebar has them (all)")
    parser.add_argument("--url", default="", help="a running console (else a stack is started as make run does)")
    parser.add_argument("--data-dir", default="", help="serve bench/console_data.py's data set loaded there")
    parser.add_argument("--database-url", default="", help="with --data-dir: the database it was loaded into")
    parser.add_argument("--user", default="")
    parser.add_argument("--password", default="")
    parser.add_argument("--settle", type=float, default=20, help="seconds of demo load before measuring")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--chromium", default=CHROMIUM)
    args = parser.parse_args()

    stack: Stack | DataStack | None = None
    try:
        if args.url:
            url, user, password = args.url.rstrip("/"), args.user, args.password
        elif args.data_dir:
            log(f"serving the data set in {args.data_dir}")
            stack = DataStack(Path(args.data_dir).resolve(), args.database_url)
            user, password = stack.wait_ready()
            url = stack.url
        else:
            log("starting the stack (scripts/run_stack.py, DEMO=1)")
            stack = Stack(args.workers)
            user, password = stack.wait_ready()
            url = stack.url
            log(f"console at {url}; letting the demo run {args.settle:.0f} s")
            time.sleep(args.settle)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=args.chromium, headless=True,
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
            )  # fmt: skip
            state, pages = log_in(browser, url, user, password)
            if args.pages:
                wanted = [p.strip().lower() for p in args.pages.split(",") if p.strip()]
                if missing := [p for p in wanted if p not in pages]:
                    sys.exit(f"no page {missing}; the sidebar has {sorted(pages)}")
                pages = {p: pages[p] for p in wanted}
            log(f"pages: {', '.join(pages)}; {args.runs} runs each")
            load_before = os.getloadavg()[0]
            results = run(browser, url, state, pages, args.runs)
            load_after = os.getloadavg()[0]
            browser.close()
    finally:
        if stack is not None:
            stack.stop()

    print(f"load average {load_before:.1f} before, {load_after:.1f} after; {platform.node()}, {os.cpu_count()} cores")
    print(table(results))
    over = verdict(results)
    within = f"every page under {COLD_LIMIT_MS:.0f} ms cold, {WARM_LIMIT_MS:.0f} ms warm (p90)"
    print("\n".join(over) if over else within)
    RESULTS_FILE.parent.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    with RESULTS_FILE.open("a") as out:
        for r in results:
            record = {"at": stamp, "machine": platform.node(), "runs": args.runs, "data_dir": args.data_dir,
                      "load_average": [round(load_before, 1), round(load_after, 1)], **asdict(r)}  # fmt: skip
            record.update(cold_summary=summary(r.cold), warm_summary=summary(r.warm))
            out.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
