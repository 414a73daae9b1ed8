"""How many acknowledged jobs a Sentinel failover loses, with and without WAIT on enqueue (ENQUEUE_REPLICAS).

    .venv/bin/python bench/sentinel_loss.py [--rounds 3] [--producers 4] [--fault crash,partition] [--wait 0,1]

Each round starts a primary, a replica and three Sentinels on loopback (tests/sentinel_servers.py). The replica
and the Sentinels reach the primary through a TCP proxy in this process; so do the producers, since the
Sentinels name the proxy's address as the primary's. `--producers` threads enqueue jobs one by one (no worker
takes them) through `Client(connect("redis+sentinel://..."), replicas=W)`, and record each id Redis
acknowledged: the enqueue returned (with W=1: after a replica confirmed it; NotReplicated counts as not
acknowledged). After a second of load, the fault:

- crash: the primary is killed (SIGKILL); the Sentinels promote the replica.
- partition: the proxy cuts the primary off from the replica and the Sentinels, but not from the producers, the
  way a network split leaves clients on the primary's side (redis-py opens a connection with HELLO, Sentinels
  with CLIENT SETNAME, replicas with PING). The Sentinels promote the replica; `--heal-after` seconds later the
  split heals, the Sentinels turn the old primary into a replica of the new one (it drops what it took
  meanwhile; they notice it at their next INFO, up to 10 s), and the producers' next writes there get READONLY
  and move to the new primary.

The producers run on for a second after the failover (and the heal); then every acknowledged id is looked up on
the new primary. Lost = acknowledged but not there. Figures go to stdout, one line per fault and WAIT setting.
"""

import argparse
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from jobconsole.core import Client, NotReplicated  # noqa: E402
from jobconsole.core.connection import connect  # noqa: E402
from jobconsole.core.errors import JobNotFound  # noqa: E402
from jobconsole.core.ids import new_job_id  # noqa: E402
from tests.redis_server import free_port  # noqa: E402
from tests.sentinel_servers import SentinelSetup  # noqa: E402

QUEUE = "loss"


class SplitProxy:
    """TCP proxy to the primary that can cut every connection but the producers' (redis-py's) and refuse new ones."""

    def __init__(self) -> None:
        self.port = free_port()
        self.target = 0
        self.split = threading.Event()
        self._lock = threading.Lock()
        self._others: list[socket.socket] = []  # sockets of connections that are not redis-py's
        self._listener = socket.create_server(("127.0.0.1", self.port))

    def start(self, target: int) -> None:
        self.target = target
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            self.split.set()
            for sock in self._others:
                _close(sock)
            self._others.clear()

    def heal(self) -> None:
        self.split.clear()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(10)
            first = conn.recv(65536)
            conn.settimeout(None)
            producer = first.startswith(b"*2\r\n$5\r\nHELLO") or b"redis-py" in first  # Sentinels and replicas: no
            if not producer and self.split.is_set():
                _close(conn)
                return
            upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            upstream.settimeout(None)
            for sock in (conn, upstream):  # no Nagle delay: Redis's replies and acks are small
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            _close(conn)
            return
        if not producer:
            with self._lock:
                if self.split.is_set():
                    _close(conn)
                    _close(upstream)
                    return
                self._others += [conn, upstream]
        upstream.sendall(first)
        threading.Thread(target=_pump, args=(conn, upstream), daemon=True).start()
        _pump(upstream, conn)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    _close(source)
    _close(sink)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


@dataclass
class Producer:
    url: str
    replicas: int
    acked: list[str] = field(default_factory=list)
    unconfirmed: int = 0
    errors: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        client = Client(connect(self.url), strict=False, replicas=self.replicas, replicas_timeout=1.0)
        while not self.stop.is_set():
            job_id = new_job_id()
            try:
                client.enqueue("bench.loss", {}, id=job_id, queue=QUEUE)
                self.acked.append(job_id)
            except NotReplicated:
                self.unconfirmed += 1
            except redis.RedisError:
                self.errors += 1
                time.sleep(0.01)


@dataclass
class Round:
    acked: int
    lost: int
    unconfirmed: int
    errors: int
    failover_s: float


def one_round(fault: str, replicas: int, producers: int, heal_after: float) -> Round:
    with tempfile.TemporaryDirectory(prefix="sentinel-loss-") as tmp:
        proxy = SplitProxy()
        setup = SentinelSetup(Path(tmp), primary_via=proxy.port)
        proxy.start(setup.primary.port)
        setup.start()
        try:
            running = [Producer(setup.url, replicas) for _ in range(producers)]
            threads = [threading.Thread(target=p.run, daemon=True) for p in running]
            for thread in threads:
                thread.start()
            time.sleep(1.0)
            if fault == "crash":
                setup.kill_primary()
            else:
                proxy.cut()
            failover_s = setup.wait_failover()
            if fault == "partition":
                time.sleep(heal_after)
                proxy.heal()
                demoted = time.monotonic() + 30
                while time.monotonic() < demoted and _role(setup.primary.client()) != "slave":
                    time.sleep(0.05)
            time.sleep(1.0)
            for p in running:
                p.stop.set()
            for thread in threads:
                thread.join(timeout=10)
            client = Client(connect(setup.url), strict=False)
            acked = [job_id for p in running for job_id in p.acked]
            lost = sum(1 for job_id in acked if not _exists(client, job_id))
            return Round(
                len(acked), lost, sum(p.unconfirmed for p in running), sum(p.errors for p in running), failover_s
            )
        finally:
            setup.stop()


def _role(client: "redis.Redis") -> str:
    try:
        return str(client.role()[0])
    except redis.RedisError:
        return ""


def _exists(client: Client, job_id: str) -> bool:
    try:
        client.get(job_id, QUEUE, history=False)
        return True
    except JobNotFound:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--fault", default="crash,partition", help="crash, partition or both")
    parser.add_argument("--wait", default="0,1", help="ENQUEUE_REPLICAS values to compare")
    parser.add_argument("--heal-after", type=float, default=1.0, help="seconds the split outlasts the failover")
    args = parser.parse_args()
    print(f"{'fault':<10} {'WAIT':>4} {'acked':>8} {'lost':>7} {'lost %':>7} {'unconfirmed':>11} {'errors':>6}"
          f" {'failover s':>10}")  # fmt: skip
    for fault in args.fault.split(","):
        for replicas in (int(w) for w in args.wait.split(",")):
            rounds = [one_round(fault, replicas, args.producers, args.heal_after) for _ in range(args.rounds)]
            for r in rounds:
                share = 100 * r.lost / r.acked if r.acked else 0.0
                print(f"{fault:<10} {replicas:>4} {r.acked:>8} {r.lost:>7} {share:>6.2f}% {r.unconfirmed:>11}"
                      f" {r.errors:>6} {r.failover_s:>10.1f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
