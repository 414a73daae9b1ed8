"""Redis Cluster: a `REDIS_URL` naming the nodes of a cluster that spreads the queues over its primaries.

    redis+cluster://[[user]:password@]host:port[,host:port...][?password=...]

(`rediss+cluster://` for TLS). The hosts are a few of the cluster's nodes (any of them, primaries or replicas):
the client asks them for the slot map (CLUSTER SLOTS) and then talks to every primary directly. A cluster has
database 0 only, so the URL has no path.

Every key of one queue carries the hash tag `{q:<queue>}` (keys.py), so every script acting on a queue runs in
one slot, on the primary that owns it; different queues hash to different slots, and so to different nodes.
The engine's client is redis-py's `RedisCluster` (it follows MOVED and ASK replies and refreshes the slot map
after a failover); the few places that assumed one node go through this module instead:

- `ClusterWire`, the hot path (wire.py's packed batches): a batch is split by the node owning each command's
  slot, every node's part sent before any reply is read (one round trip in time, whatever the node count).
  A MOVED, ASK, TRYAGAIN or CLUSTERDOWN reply (the command did nothing) is run again through `RedisCluster`,
  which follows the redirection and refreshes the slot map for the next batch.
- `wait_any`: a blocking command (BLPOP, XREAD BLOCK) takes keys of one slot only, so a worker serving several
  queues blocks on each queue in a thread of its own (`Fanout`) and wakes on the first that answers; nothing
  polls, and the pick-up costs one thread hand-off (docs/architecture.md, "Redis Cluster").
- `mirror_read`: the mirror reads each queue's stream in a script of its own (the streams are in different
  slots), all pipelined together, after counting the epoch up.
"""

import queue as stdqueue
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, TypeGuard, cast

import redis
from hiredis import pack_command
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.exceptions import AskError, ClusterDownError, MovedError, ResponseError, TryAgainError
from redis.retry import Retry

from jobconsole.core import hosts_url
from jobconsole.core.wire import Command, Wire

SCHEMES = ("redis+cluster", "rediss+cluster")
REDIRECTED = (MovedError, AskError, TryAgainError, ClusterDownError)  # the command did nothing: run it again
ERROR_PAUSE_S = 0.1  # a Fanout thread whose blocking call failed waits this long before it blocks again


@dataclass(frozen=True)
class ClusterTarget:
    """What a `redis+cluster://` URL says."""

    nodes: tuple[tuple[str, int], ...]
    password: str | None = None
    username: str | None = None
    ssl: bool = False


def is_cluster_url(url: str) -> bool:
    return url.partition("://")[0].lower() in SCHEMES


def is_cluster(client: object) -> TypeGuard[RedisCluster]:
    return isinstance(client, RedisCluster)


def parse_url(url: str) -> ClusterTarget:
    """The parts of a `redis+cluster://` URL; ValueError says what is wrong."""
    parts = hosts_url.parse(url, SCHEMES, "cluster (redis+cluster://host:port[,host:port...])", "node", ("password",))
    if parts.path.strip("/") not in ("", "0"):
        raise ValueError(f"{url!r}: a Redis Cluster has database 0 only; leave the path out")
    password = parts.params.get("password", parts.password)
    return ClusterTarget(parts.hosts, password, parts.username, parts.scheme == SCHEMES[1])


def connect(url: str, options: dict[str, Any]) -> "redis.Redis":
    """A `RedisCluster` for `url` with the connection `options` (connection.connect's). Typed as redis.Redis:
    the engine calls only commands both have, and routes the rest through this module."""
    target = parse_url(url)
    extra: dict[str, Any] = {"password": target.password, "username": target.username}
    if target.ssl:
        extra["ssl"] = True
    options = {k: v for k, v in options.items() if k != "retry_on_error"}  # RedisCluster retries on its own
    startup = [ClusterNode(host, port) for host, port in target.nodes]  # type: ignore[no-untyped-call]
    return cast("redis.Redis", RedisCluster(startup_nodes=startup, **options, **extra))


def without_retries(client: RedisCluster) -> "redis.Redis":
    """A client of the same cluster that never re-sends a command after a connection error (the worker's, see
    connection.without_retries); it still follows MOVED and ASK, which say the command did nothing."""
    kwargs = {k: v for k, v in client.nodes_manager.connection_kwargs.items() if k != "retry"}
    startup = [ClusterNode(n.host, n.port) for n in client.nodes_manager.startup_nodes.values()]  # type: ignore[no-untyped-call]
    return cast("redis.Redis", RedisCluster(startup_nodes=startup, retry=Retry(NoBackoff(), 0), **kwargs))


def decodes(client: RedisCluster) -> bool:
    return bool(client.nodes_manager.connection_kwargs.get("decode_responses"))


# --- the hot path: packed batches split by node -----------------------------------------------------------


@lru_cache(maxsize=65_536)
def slot_of(key: str) -> int:
    return int(key_slot(key.encode()))


def command_key(command: Command) -> str | None:
    """The key a command is routed by: EVALSHA's first key, else the first argument (None: no key)."""
    name = str(command[0]).upper()
    if name in ("EVALSHA", "EVAL"):
        return str(command[3]) if int(command[2]) > 0 else None
    if name == "WAIT" or len(command) < 2:
        return None
    return str(command[1])


class ClusterWire:
    """wire.Wire for a cluster: each command goes to the primary owning its key's slot, over that node's
    Wire (a connection kept per thread). A keyless WAIT goes to every node the batch wrote to; its reply is
    the fewest replicas any of them counted."""

    def __init__(self, client: RedisCluster) -> None:
        self.client = client
        self._wires: dict[str, tuple[Any, Wire]] = {}
        self._lock = threading.Lock()
        self._stale = False

    def _node_wire(self, node: ClusterNode) -> Wire:
        held = self._wires.get(node.name)
        if held is None or held[0] is not node.redis_connection:
            with self._lock:
                if node.redis_connection is None:
                    self.client.nodes_manager.create_redis_connections([node])  # type: ignore[no-untyped-call]
                held = self._wires[node.name] = (
                    node.redis_connection,
                    Wire(cast("redis.Redis", node.redis_connection)),
                )
        return held[1]

    def execute(self, commands: Sequence[Command], spin_s: float = 0.0) -> list[Any]:
        def refresh(_error: Exception) -> None:
            self._stale = True

        replies: list[Any] = self.client.retry.call_with_retry(lambda: self._execute_once(commands, spin_s), refresh)
        return replies

    def _execute_once(self, commands: Sequence[Command], spin_s: float) -> list[Any]:
        if self._stale:  # a connection failed: the slot map may have changed (a failover); ask again
            try:
                self.client.nodes_manager.initialize()
                self._stale = False
            except redis.RedisError:
                pass
        manager = self.client.nodes_manager
        routes: dict[str, tuple[ClusterNode, list[int]]] = {}
        waits: list[int] = []
        others: list[int] = []
        for i, command in enumerate(commands):
            key = command_key(command)
            if key is None:
                (waits if str(command[0]).upper() == "WAIT" else others).append(i)
                continue
            node = manager.get_node_from_slot(slot_of(key))
            routes.setdefault(node.name, (node, []))[1].append(i)
        replies: list[Any] = [None] * len(commands)
        try:
            if len(routes) == 1 and not waits:
                node, indexes = next(iter(routes.values()))
                for i, reply in zip(indexes, self._node_wire(node).execute(commands, spin_s), strict=True):
                    replies[i] = reply
            elif routes:
                self._fan_out(commands, routes, waits, replies)
        except (redis.ConnectionError, redis.TimeoutError):
            self._stale = True
            raise
        for i, reply in enumerate(replies):
            if isinstance(reply, REDIRECTED):  # did nothing: RedisCluster follows it (and updates the slot map)
                replies[i] = self._ordinary(commands[i])
        for i in others:
            replies[i] = self._ordinary(commands[i])
        return replies

    def _fan_out(
        self,
        commands: Sequence[Command],
        routes: dict[str, tuple[ClusterNode, list[int]]],
        waits: list[int],
        replies: list[Any],
    ) -> None:
        """Every node's commands written before any reply is read: one round trip in time."""
        sent: list[tuple[Any, list[int], bool]] = []
        try:
            for node, indexes in routes.values():
                conn = self._node_wire(node)._held().conn
                packed = [pack_command(tuple(commands[i])) for i in indexes]  # type: ignore[arg-type]
                if waits:
                    packed.append(pack_command(tuple(commands[waits[0]])))  # type: ignore[arg-type]
                conn.send_packed_command([b"".join(packed)])
                sent.append((conn, indexes, bool(waits)))
            acknowledged: list[Any] = []
            for conn, indexes, waited in sent:
                for i in indexes:
                    try:
                        replies[i] = conn.read_response()
                    except ResponseError as exc:
                        replies[i] = exc
                if waited:
                    acknowledged.append(conn.read_response())
        except BaseException:
            for conn, _, _ in sent:
                conn.disconnect()  # a half-read reply stream must never be reused
            raise
        for i in waits:
            replies[i] = min(int(a) for a in acknowledged)

    def _ordinary(self, command: Command) -> Any:
        try:
            return self.client.execute_command(*command)  # type: ignore[no-untyped-call]
        except ResponseError as exc:
            return exc


_wires: "weakref.WeakKeyDictionary[RedisCluster, ClusterWire]" = weakref.WeakKeyDictionary()


def wire(client: RedisCluster) -> ClusterWire:
    found = _wires.get(client)
    if found is None:
        found = _wires[client] = ClusterWire(client)
    return found


def load_scripts(client: RedisCluster, sources: Sequence[str]) -> None:
    """SCRIPT LOAD every script on every primary (a promoted replica is loaded the next time a NOSCRIPT says so)."""
    for node in client.get_primaries():  # type: ignore[no-untyped-call]
        if node.redis_connection is None:
            client.nodes_manager.create_redis_connections([node])  # type: ignore[no-untyped-call]
        pipe = cast("redis.Redis", node.redis_connection).pipeline(transaction=False)
        for source in sources:
            pipe.script_load(source)
        pipe.execute()


# --- blocking on keys of several slots -------------------------------------------------------------------


type Blocking = Callable[[float], Any]  # a blocking call given its timeout in seconds: a reply, or None


class Fanout:
    """Blocking calls on several slots, each in a thread of its own, while someone waits in `wait`.

    A thread blocks only while a wait is on (its deadline not passed), so an idle Fanout holds no connection
    busy. A reply that arrives after the wait that asked for it ended (another thread answered first) is kept
    for the next wait, which returns it at once: nothing a blocking pop took is dropped. An error is raised only
    by the wait during which its call began (an old one would make the caller back off again after the node
    came back)."""

    def __init__(self, calls: Sequence[Blocking]) -> None:
        self._replies: stdqueue.SimpleQueue[Any] = stdqueue.SimpleQueue()
        self._deadline = 0.0
        self._generation = 0  # counts the waits
        self._demand = threading.Condition()
        self._closed = False
        self.threads = [threading.Thread(target=self._run, args=(c,), daemon=True, name="jc-fanout") for c in calls]
        for thread in self.threads:
            thread.start()

    def wait(self, timeout: float) -> Any:
        """The first reply of any call within `timeout` seconds, or None; raises what a call raised."""
        deadline = time.monotonic() + timeout
        with self._demand:
            self._generation += 1
            generation = self._generation
            self._deadline = deadline
            self._demand.notify_all()
        while True:
            try:
                reply = self._replies.get(timeout=max(0.0, deadline - time.monotonic()))
            except stdqueue.Empty:
                return None
            if not isinstance(reply, _Failed):
                return reply
            if reply.generation == generation:
                raise reply.error

    def close(self) -> None:
        self._closed = True
        with self._demand:
            self._demand.notify_all()

    def _run(self, call: Blocking) -> None:
        answered = -1  # the last wait this thread gave a reply to: it blocks again only for a later one
        while not self._closed:
            with self._demand:
                left = self._deadline - time.monotonic()
                if left <= 0.001 or self._generation == answered:
                    self._demand.wait()
                    continue
                generation = self._generation
            try:
                reply = call(left)
            except BaseException as exc:  # noqa: BLE001 - the waiter raises it
                self._replies.put(_Failed(generation, exc))
                time.sleep(ERROR_PAUSE_S)
                continue
            if reply is not None:
                answered = generation
                self._replies.put(reply)


@dataclass(frozen=True, slots=True)
class _Failed:
    generation: int
    error: BaseException


class Fanouts:
    """The Fanout of each set of blocking calls a process makes, made on first use and kept."""

    def __init__(self) -> None:
        self._made: dict[Any, Fanout] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, calls: Callable[[], Sequence[Blocking]]) -> Fanout:
        fanout = self._made.get(key)
        if fanout is None:
            with self._lock:
                fanout = self._made.get(key)
                if fanout is None:
                    fanout = self._made[key] = Fanout(calls())
        return fanout


_fanouts: "weakref.WeakKeyDictionary[RedisCluster, Fanouts]" = weakref.WeakKeyDictionary()


def wait_any(client: RedisCluster, key: Any, calls: Callable[[], Sequence[Blocking]], timeout: float) -> Any:
    """The first reply of `calls` (blocking calls on different slots), made in threads kept under `key`."""
    fanouts = _fanouts.get(client)
    if fanouts is None:
        fanouts = _fanouts.setdefault(client, Fanouts())
    return fanouts.get(key, calls).wait(timeout)


def by_slot(keys: Sequence[str]) -> list[list[str]]:
    """`keys` grouped by slot, each group in the order given."""
    groups: dict[int, list[str]] = {}
    for key in keys:
        groups.setdefault(slot_of(key), []).append(key)
    return list(groups.values())


def _blpop(client: RedisCluster, keys: Sequence[str], timeout: float) -> Any:
    return client.blpop(list(keys), timeout=max(0.001, round(timeout, 3)))


def blpop_any(client: RedisCluster, key_groups: Sequence[Sequence[str]], timeout: float) -> Any:
    """BLPOP over lists of several slots (`key_groups`, each of one slot): (key, value) or None."""
    if len(key_groups) == 1:
        return _blpop(client, key_groups[0], timeout)
    group_key = ("blpop", tuple(tuple(g) for g in key_groups))
    return wait_any(client, group_key, lambda: [partial(_blpop, client, g) for g in key_groups], timeout)


def _xread(client: RedisCluster, streams: dict[str, str], timeout: float) -> Any:
    return client.xread(cast(Any, streams), count=1, block=max(1, int(timeout * 1000))) or None


def xread_any(client: RedisCluster, stream_groups: Sequence[dict[str, str]], timeout: float) -> bool:
    """Whether XREAD BLOCK on streams of several slots (`stream_groups`: stream -> last id seen, each of one
    slot) found an entry within `timeout` seconds. The ids are those of the wait that started each thread's
    block: a later wait may return at once for entries already read, which costs one read that finds nothing."""
    if len(stream_groups) == 1:
        return bool(_xread(client, stream_groups[0], timeout))
    group_key = ("xread", tuple(tuple(sorted(g)) for g in stream_groups))
    current = _xread_ids.setdefault(group_key, [dict(g) for g in stream_groups])
    for held, new in zip(current, stream_groups, strict=True):
        held.update(new)
    return bool(wait_any(client, group_key, lambda: [partial(_xread, client, g) for g in current], timeout))


_xread_ids: dict[Any, list[dict[str, str]]] = {}
