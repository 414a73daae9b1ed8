"""`make run`: migrate, make an admin account, then run the stack in the foreground with prefixed logs:
a private redis-server (unless REDIS_URL is set), gunicorn on 127.0.0.1:$PORT (8000), a runworker of $WORKERS (1)
worker processes (`--processes`, which restarts one that dies itself),
a runworker of the system queue (bulk operations), the database mirror (`manage.py runmirror`), and with
DEMO=1 the demo producer (`manage.py demo`, $DEMO_RATE jobs a second).

A worker, web or demo process that exits is restarted with a backoff; Redis exiting stops the stack. Ctrl-C (or
SIGTERM) stops everything: the demo and the workers first, Redis last. See scripts/stack/supervisor.py."""

import functools
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from stack import embedded_redis
from stack.supervisor import Service, Supervisor, say

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from jobconsole.bulk.system import SYSTEM_QUEUE  # noqa: E402 - Django-free, needs the checkout on the path
from project import var_dir  # noqa: E402 - Django-free too: var/ owner-only, as the settings keep it

VAR = Path(os.environ.get("JOBCONSOLE_VAR_DIR", ROOT / "var"))
PYTHON = sys.executable
TRUE = {"1", "true", "yes", "on"}


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, text=True, capture_output=True)
    if result.returncode != 0:
        sys.exit(f"manage.py {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result


def worker_count() -> int:
    raw = os.environ.get("WORKERS", "1").strip() or "1"
    if not raw.isdigit():
        sys.exit(f"WORKERS={raw!r}: give a number of worker processes, e.g. make run WORKERS=2")
    return int(raw)


def worker_service(workers: int) -> Service:
    """One runworker supervising `workers` worker processes (`--processes`): it starts again one that dies, and
    each process has an id of its own (`<host>:<pid>:<random>`), so the console shows a killed one gone and the new
    one beside it."""
    command = [PYTHON, "manage.py", "runworker", "--processes", str(workers), "--no-system-worker", "--no-mirror"]
    return Service("worker", lambda: command, color="34", stop_order=1)


def mirror_service() -> Service:
    """The database mirror in a process of its own, as the Procfile runs it: its database writes then take no
    interpreter lock from a worker's tasks (docs/benchmarks.md)."""
    return Service("mirror", lambda: [PYTHON, "manage.py", "runmirror"], color="33", stop_order=1)


def system_service() -> Service:
    """The system queue (bulk operations) in a process of its own, as the Procfile runs it: a 100,000-job
    resubmit then shares no interpreter lock with task threads and the mirror (docs/benchmarks.md)."""
    host = socket.gethostname()

    def command() -> list[str]:
        return [PYTHON, "manage.py", "runworker", "--queues", SYSTEM_QUEUE, "--no-system-worker", "--no-mirror",
                "--no-maintenance", "--no-scheduler", "--name", f"{host}:system:{secrets.token_hex(2)}"]  # fmt: skip

    return Service("system", command, color="36", stop_order=1)


def services(env: dict[str, str], port: str, workers: int, demo: bool) -> list[Service]:
    # No control socket: gunicorn's default path is per user, and two stacks (or a test's) would share it.
    web = [PYTHON, "-m", "gunicorn", "project.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "2",
           "--threads", "4", "--access-logfile", "-", "--no-control-socket"]  # fmt: skip
    out = [Service("web", lambda: web, color="32", stop_order=2)]
    if workers:
        out.append(worker_service(workers))
    out.append(system_service())
    out.append(mirror_service())
    if demo:
        rate = env.get("DEMO_RATE", "")
        demo_command = [PYTHON, "manage.py", "demo", *(["--rate", rate] if rate else [])]
        out.append(Service("demo", lambda: demo_command, color="35", stop_order=0))
    return out


def start_redis(supervisor: Supervisor, env: dict[str, str]) -> None:
    """Start the embedded Redis under the supervisor and point everything at it."""
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (scripts/bootstrap.sh says how), or set REDIS_URL")
    var_dir.private_dir(VAR / "redis")  # Redis's data: jobs' parameters and results
    for attempt in range(3):
        port = embedded_redis.pick_port(default_first=attempt == 0)
        command = functools.partial(embedded_redis.command, binary, port, VAR / "redis")
        redis = Service("redis", command, color="31", stop_order=3, essential=True)
        supervisor.services.append(redis)
        supervisor.start(redis)
        if own_redis_answers(supervisor, redis, port):
            break
        supervisor.discard(redis)  # another server took the port first (another stack starting): another port
        print(f"redis-server could not take port {port}; trying a free one", flush=True)
    else:
        sys.exit("redis-server exited three times; see its log above")
    url = f"redis://127.0.0.1:{port}/0"
    # Other shells (`manage.py enqueue`, `manage.py shell`) find the embedded Redis through this file.
    var_dir.write_private(VAR / "redis.url", url + "\n")
    env["REDIS_URL"] = url


def own_redis_answers(supervisor: Supervisor, redis: Service, port: int) -> bool:
    """Wait until the server on `port` is the one just started (True), or it has exited (False)."""
    deadline = time.monotonic() + 15
    assert redis.proc is not None
    while embedded_redis.serving_pid(port) != redis.proc.pid:
        supervisor.pump(0.05)
        if redis.proc.poll() is not None:
            return False
        if time.monotonic() > deadline:
            sys.exit("redis-server did not start within 15 s")
    return True


def main() -> int:
    var_dir.protect(VAR)
    # DEBUG on (unless the caller says otherwise): this is the local stack, and with DEBUG the settings make
    # and keep a SECRET_KEY of the checkout's own in var/secret_key.
    # The seed systems had no authentication: their clients and tests work against this loopback-only stack
    # as they are (a deployment leaves it off, and needs a token there).
    env = {
        "DEBUG": "1",
        "JOBCONSOLE_API_ANONYMOUS_SEEDS": "1",
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "DJANGO_SETTINGS_MODULE": "project.settings",
    }
    workers = worker_count()
    demo = os.environ.get("DEMO", "").strip().lower() in TRUE
    port = os.environ.get("PORT", "8000")
    supervisor = Supervisor([], cwd=ROOT, env=env)
    try:
        if not os.environ.get("REDIS_URL"):
            start_redis(supervisor, env)
        say(f"redis: {env['REDIS_URL']}")
        manage("migrate", "--noinput", env=env)
        manage("collectstatic", "--noinput", env=env)
        print(manage("ensureadmin", env=env).stdout, end="", flush=True)
        supervisor.services[:0] = services(env, port, workers, demo)
        say(f"console: http://127.0.0.1:{port}/   admin: http://127.0.0.1:{port}/admin/")
        anonymous = env["JOBCONSOLE_API_ANONYMOUS_SEEDS"].strip().lower() in TRUE
        say(
            "seed interfaces (/jobber/, /jobs, /schedule/, /jobbers/...): "
            + ("open to callers without a token (JOBCONSOLE_API_ANONYMOUS_SEEDS=1)" if anonymous else "token required")
            + "; the native API /api/v1/ always needs one (manage.py apitoken create --name me --scope operate)"
        )
        say(f"{workers} worker{'s' if workers != 1 else ''}; demo load {'on' if demo else 'off (make run DEMO=1)'}")
        say("try: .venv/bin/python manage.py enqueue examples.echo '{\"x\": 1}'   (Ctrl-C stops everything)")
        return supervisor.run()
    except BaseException:  # a failed start-up step, Ctrl-C during it, or a bug: leave nothing running behind
        try:
            supervisor.stop_all()
        finally:
            supervisor.kill_all()
        raise


if __name__ == "__main__":
    sys.exit(main())
