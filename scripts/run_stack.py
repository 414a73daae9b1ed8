"""`make run`: migrate, make an admin account, then run the stack in the foreground with prefixed logs:
a private redis-server (unless REDIS_URL is set), gunicorn on 127.0.0.1:$PORT (8000), and one runworker.
Ctrl-C (or SIGTERM) stops them all; if one of them dies, the others are stopped too."""

import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR = Path(os.environ.get("JOBCONSOLE_VAR_DIR", ROOT / "var"))
PYTHON = sys.executable
EMBEDDED_REDIS_PORT = 6388
COLORS = {"redis": "31", "web": "32", "worker": "34"}


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def pick_redis_port() -> int:
    if port_free(EMBEDDED_REDIS_PORT):
        return EMBEDDED_REDIS_PORT
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, text=True, capture_output=True)
    if result.returncode != 0:
        sys.exit(f"manage.py {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result


def wait_for_redis(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"redis-server exited with code {proc.returncode}; see the log above")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    sys.exit("redis-server did not start within 15 s")


def main() -> int:
    VAR.mkdir(parents=True, exist_ok=True)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        return start(procs)
    finally:
        for proc in procs.values():  # whatever went wrong, leave nothing running behind us
            if proc.poll() is None:
                proc.kill()


def start(procs: dict[str, subprocess.Popen[bytes]]) -> int:
    # DEBUG on (unless the caller says otherwise): this is the local stack, and with DEBUG the settings make
    # and keep a SECRET_KEY of the checkout's own in var/secret_key.
    env = {"DEBUG": "1", **os.environ, "PYTHONUNBUFFERED": "1", "DJANGO_SETTINGS_MODULE": "project.settings"}

    if not os.environ.get("REDIS_URL"):
        binary = shutil.which("redis-server")
        if binary is None:
            sys.exit("redis-server is not installed (scripts/bootstrap.sh says how), or set REDIS_URL")
        port = pick_redis_port()
        (VAR / "redis").mkdir(exist_ok=True)
        procs["redis"] = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--protected-mode", "yes",
             "--dir", str(VAR / "redis"), "--appendonly", "yes", "--appendfsync", "everysec",
             "--save", "", "--maxmemory-policy", "noeviction"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        wait_for_redis(port, procs["redis"])
        url = f"redis://127.0.0.1:{port}/0"
        # Other shells (`manage.py enqueue`, `manage.py shell`) find the embedded Redis through this file.
        (VAR / "redis.url").write_text(url + "\n")
        env["REDIS_URL"] = url
    print(f"[stack] redis: {env.get('REDIS_URL')}", flush=True)

    manage("migrate", "--noinput", env=env)
    manage("collectstatic", "--noinput", env=env)
    print(manage("ensureadmin", env=env).stdout, end="", flush=True)
    port = os.environ.get("PORT", "8000")
    procs["web"] = subprocess.Popen(
        [PYTHON, "-m", "gunicorn", "project.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "2",
         "--threads", "4", "--access-logfile", "-"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    procs["worker"] = subprocess.Popen(
        [PYTHON, "manage.py", "runworker"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # so Ctrl-C reaches only us; each child then gets exactly one SIGTERM
    )
    print(f"[stack] console: http://127.0.0.1:{port}/   admin: http://127.0.0.1:{port}/admin/", flush=True)
    print("[stack] try: .venv/bin/python manage.py enqueue examples.echo '{\"x\": 1}'   (Ctrl-C stops everything)")
    return supervise(procs)


def supervise(procs: dict[str, subprocess.Popen[bytes]]) -> int:
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    sel = selectors.DefaultSelector()
    for name, proc in procs.items():
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        sel.register(proc.stdout, selectors.EVENT_READ, name)
    code = 0
    while not stopping:
        for key, _ in sel.select(timeout=0.5):
            chunk = key.fileobj.read()  # type: ignore[union-attr]
            if chunk:
                for line in chunk.decode(errors="replace").splitlines():
                    print(f"\033[{COLORS[key.data]}m{key.data:>6} |\033[0m {line}", flush=True)
        dead = [n for n, p in procs.items() if p.poll() is not None]
        if dead:
            print(f"[stack] {', '.join(dead)} exited; stopping the rest", flush=True)
            code = 1
            break
    # Workers and web first (they may still write to Redis), Redis last.
    for name in ("worker", "web", "redis"):
        proc = procs.get(name)
        if proc and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        if proc and proc.stdout:
            rest = proc.stdout.read() or b""
            for line in rest.decode(errors="replace").splitlines():
                print(f"{name:>6} | {line}", flush=True)
    print("[stack] stopped", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
