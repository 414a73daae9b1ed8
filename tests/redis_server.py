"""A private redis-server for tests: free port, temp dir, AOF on; can be killed and restarted."""

import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    def __init__(self, directory: Path, appendfsync: str = "always") -> None:
        self.binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.dir = directory
        self.port = free_port()
        self.appendfsync = appendfsync
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_once = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        """Start the server and return once it answers. A free port is only free when asked: another process
        (a parallel test worker, another checkout's tests) may take it before redis-server binds it. On the first
        start that shows as our server exiting, or as a ping answered by somebody else's server; then try again
        on another port. A restart keeps its port (its clients and replicas know it), so it fails instead."""
        self.dir.mkdir(parents=True, exist_ok=True)
        attempts = 1 if self.started_once else 5
        for attempt in range(attempts):
            if self._spawn():
                self.started_once = True
                return self
            if attempt + 1 < attempts:
                self.port = free_port()
        raise RuntimeError(f"redis-server did not start (last port {self.port}); see {self.dir / 'redis.log'}")

    def _spawn(self) -> bool:
        """Run redis-server on self.port; True once it answers as itself, False if the port was not ours."""
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--appendonly", "yes", "--appendfsync", self.appendfsync, "--save", "",
             "--maxmemory-policy", "noeviction", "--enable-debug-command", "local",
             "--logfile", str(self.dir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        try:
            while True:
                if self.proc.poll() is not None:  # exited: most likely the port was taken
                    self.proc = None
                    return False
                try:
                    answering_pid = int(client.info("server")["process_id"])
                    if answering_pid == self.proc.pid and client.ping():  # ping: fails while the AOF loads
                        return True
                except (redis.ConnectionError, redis.BusyLoadingError):
                    answering_pid = None  # not up yet (or still loading its AOF)
                except redis.ResponseError:
                    answering_pid = -1  # a server that wants a password: not ours
                if answering_pid not in (None, self.proc.pid):  # another server holds the port
                    self.kill()
                    return False
                if time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError(f"redis-server on port {self.port} did not start within 10 s")
                time.sleep(0.02)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL, like a crash: only what AOF had on disk survives."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def copy_aof(self, to: Path) -> None:
        """Copy the AOF as it is on disk now (a backup, or the disk state a power loss may leave)."""
        shutil.copytree(self.dir / "appendonlydir", to)

    def restore_aof(self, copy: Path) -> None:
        """Replace the AOF with an earlier copy (the server must be down); it loads that state on start."""
        shutil.rmtree(self.dir / "appendonlydir")
        shutil.copytree(copy, self.dir / "appendonlydir")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None
