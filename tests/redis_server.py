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

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--appendonly", "yes", "--appendfsync", self.appendfsync, "--save", "",
             "--maxmemory-policy", "noeviction", "--enable-debug-command", "local",
             "--logfile", str(self.dir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except (redis.ConnectionError, redis.BusyLoadingError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {self.port} did not start") from None
                time.sleep(0.02)
        client.close()
        return self

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
