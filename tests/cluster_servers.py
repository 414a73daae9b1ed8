"""A Redis Cluster for tests: `primaries` primaries (and as many replicas, one each, when asked), each a
redis-server with `--cluster-enabled yes` on a free loopback port in a temp dir, joined by `redis-cli --cluster
create`. A primary can be killed; with `cluster-node-timeout` short, its replica takes over on its own.
`bench/cluster_throughput.py` and the chaos scenario `cluster_failover` use it too."""

import random
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import redis
from redis.crc import key_slot

from tests.sentinel_servers import Node


def cluster_port() -> int:
    """A free loopback port at most 55535 whose bus port (+10000, the nodes' own traffic) is free too."""
    while True:
        port = random.randint(20_000, 55_535)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10_000))
        except OSError:
            continue
        return port


class ClusterSetup:
    def __init__(self, directory: Path, primaries: int = 3, replicas: bool = True, node_timeout_ms: int = 1000) -> None:
        self.dir = directory
        self.node_timeout_ms = node_timeout_ms
        count = primaries * (2 if replicas else 1)
        self.nodes = [Node(directory, f"node{i}") for i in range(count)]
        for node in self.nodes:
            node.port = cluster_port()
        self.replicas = replicas

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes if n.proc is not None)
        return f"redis+cluster://{hosts}"

    def _args(self, node: Node) -> list[str]:
        return [
            "--port", str(node.port), "--bind", "127.0.0.1", "--dir", str(node.dir),
            "--logfile", str(node.dir / "redis.log"), "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", str(self.node_timeout_ms),
            "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--maxmemory-policy", "noeviction",
            "--repl-diskless-sync-delay", "0", "--cluster-replica-validity-factor", "0",
        ]  # fmt: skip

    def start(self) -> "ClusterSetup":
        for node in self.nodes:
            node.start(self._args(node))
        for node in self.nodes:
            self._wait(node.client().ping, f"{node.name} to answer")
        cli = shutil.which("redis-cli") or "/usr/bin/redis-cli"
        hosts = [f"127.0.0.1:{n.port}" for n in self.nodes]
        replicas = ["--cluster-replicas", "1"] if self.replicas else []
        subprocess.run(
            [cli, "--cluster", "create", *hosts, *replicas, "--cluster-yes"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30,
        )  # fmt: skip
        self._wait(self.healthy, "the cluster to be ok on every node")
        return self

    def healthy(self) -> bool:
        """Every live node says cluster_state:ok and every replica's link to its primary is up."""
        for node in self.nodes:
            if node.proc is None:
                continue
            client = node.client()
            if client.cluster("info")["cluster_state"] != "ok":
                return False
            info = client.info("replication")
            if info["role"] == "slave" and info.get("master_link_status") != "up":
                return False
        return True

    def client(self) -> "redis.RedisCluster":
        live = [n for n in self.nodes if n.proc is not None]
        return redis.RedisCluster(host="127.0.0.1", port=live[0].port, decode_responses=True)

    def primaries(self) -> list[Node]:
        return [n for n in self.nodes if n.proc is not None and n.client().role()[0] == "master"]

    def node_of(self, key: str) -> Node:
        """The live primary that owns `key`'s slot."""
        slot = key_slot(key.encode())
        for node in self.primaries():
            for start, end, *_ in node.client().cluster("slots"):
                if int(start) <= slot <= int(end):
                    port = int(_[0][1])
                    return next(n for n in self.nodes if n.port == port)
        raise LookupError(key)

    def replica_of(self, primary: Node) -> Node:
        node_id = primary.client().cluster("myid")
        for node in self.nodes:
            if node is primary or node.proc is None:
                continue
            info = node.client().info("replication")
            if info["role"] == "slave" and int(info["master_port"]) == primary.port:
                return node
        raise LookupError(f"no replica of {primary.name} ({node_id})")

    def kill_and_wait_failover(self, primary: Node, timeout: float = 30) -> Node:
        """SIGKILL `primary`; wait until its replica is a primary and the cluster is ok again; returns it."""
        replica = self.replica_of(primary)
        primary.kill()
        self._wait(lambda: replica.client().role()[0] == "master", f"{replica.name} to be promoted", timeout)
        self._wait(self.healthy, "the cluster to be ok after the failover", timeout)
        return replica

    def logs(self) -> str:
        return "\n".join(node.log() for node in self.nodes)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def _wait(self, condition: Callable[[], object], what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if condition():
                    return
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError, redis.ResponseError):
                pass
            if time.monotonic() > deadline:
                logs = self.logs()
                self.stop()
                raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}\n{logs}")
            time.sleep(0.05)
