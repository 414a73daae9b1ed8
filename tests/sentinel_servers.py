"""A Sentinel-managed Redis for tests: a primary, a replica and Sentinels (the same redis-server binary with
`--sentinel`), each on a free loopback port in a temp dir. The primary can be killed; the Sentinels then promote
the replica. `bench/sentinel_loss.py` uses it too."""

import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import redis

from tests.redis_server import free_port

SERVICE = "jc"


class Node:
    """One redis-server process (a data node or a Sentinel) with its own dir and log."""

    def __init__(self, directory: Path, name: str) -> None:
        self.dir = directory / name
        self.name = name
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, args: list[str]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.proc = subprocess.Popen([binary, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def client(self, timeout: float = 1.0) -> "redis.Redis":
        return redis.Redis(
            port=self.port, socket_timeout=timeout, socket_connect_timeout=timeout, decode_responses=True
        )

    def log(self) -> str:
        path = self.dir / "redis.log"
        return f"--- {self.name}:\n" + (path.read_text(errors="replace")[-3000:] if path.exists() else "(no log)")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


class SentinelSetup:
    """`primary` and `replica` data nodes and `count` Sentinels (quorum: a majority) watching service "jc"."""

    def __init__(
        self,
        directory: Path,
        count: int = 3,
        down_after_ms: int = 1000,
        appendfsync: str = "everysec",
        primary_via: int | None = None,
    ) -> None:
        """`primary_via`: a port (a proxy's) through which the replica and the Sentinels reach the primary."""
        self.dir = directory
        self.primary_via = primary_via
        self.primary = Node(directory, "primary")
        self.replica = Node(directory, "replica")
        self.sentinels = [Node(directory, f"sentinel{i}") for i in range(count)]
        self.down_after_ms = down_after_ms
        self.appendfsync = appendfsync

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    @property
    def watched_port(self) -> int:
        return self.primary_via or self.primary.port

    def _data_args(self, node: Node) -> list[str]:
        return [
            "--port", str(node.port), "--bind", "127.0.0.1", "--dir", str(node.dir),
            "--logfile", str(node.dir / "redis.log"),
            "--appendonly", "yes", "--appendfsync", self.appendfsync, "--save", "", "--maxmemory-policy", "noeviction",
            "--repl-diskless-sync-delay", "0", "--enable-debug-command", "local",
        ]  # fmt: skip

    def start(self) -> "SentinelSetup":
        self.primary.start(self._data_args(self.primary))
        self._wait(lambda: self.primary.client().ping(), "the primary to answer")
        self.replica.start([*self._data_args(self.replica), "--replicaof", "127.0.0.1", str(self.watched_port)])
        self._wait(lambda: self.replica.client().info("replication").get("master_link_status") == "up", "replication")
        quorum = len(self.sentinels) // 2 + 1
        for node in self.sentinels:
            node.dir.mkdir(parents=True, exist_ok=True)
            config = node.dir / "sentinel.conf"  # Sentinel rewrites its config file: it must be writable
            config.write_text(
                f"port {node.port}\nbind 127.0.0.1\ndir {node.dir}\nlogfile {node.dir / 'redis.log'}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.watched_port} {quorum}\n"
                f"sentinel down-after-milliseconds {SERVICE} {self.down_after_ms}\n"
                f"sentinel failover-timeout {SERVICE} 2000\nsentinel parallel-syncs {SERVICE} 1\n"
            )
            node.start([str(config), "--sentinel"])
        self._wait(self._sentinels_ready, "every Sentinel to see the replica and the other Sentinels")
        return self

    def _sentinels_ready(self) -> bool:
        for node in self.sentinels:
            state = cast(dict[str, Any], node.client().sentinel_master(SERVICE))
            if state["num-slaves"] < 1 or state["num-other-sentinels"] < len(self.sentinels) - 1:
                return False
        return True

    def primary_port(self) -> int | None:
        """The primary's port as the first Sentinel that answers says it."""
        for node in self.sentinels:
            try:
                address = cast(tuple[str, int] | None, node.client().sentinel_get_master_addr_by_name(SERVICE))
            except redis.RedisError:
                continue
            return int(address[1]) if address else None
        return None

    def kill_primary(self) -> None:
        self.primary.kill()

    def wait_failover(self, timeout: float = 30) -> float:
        """Wait until the Sentinels name the replica as the primary and it has taken the role; the seconds it took."""
        started = time.monotonic()

        def promoted() -> bool:
            return self.primary_port() == self.replica.port and self.replica.client().role()[0] == "master"

        self._wait(promoted, "the Sentinels to promote the replica", timeout)
        return time.monotonic() - started

    def logs(self) -> str:
        return "\n".join(node.log() for node in [self.primary, self.replica, *self.sentinels])

    def stop(self) -> None:
        for node in [*self.sentinels, self.replica, self.primary]:
            node.stop()

    def _wait(self, condition: Callable[[], object], what: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if condition():
                    return
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}\n{self.logs()}")
            time.sleep(0.05)
