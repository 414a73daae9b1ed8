"""The Lua scripts: one file per atomic operation, loaded once, run by SHA with a NOSCRIPT fallback.

Every script is prefixed with the helpers of ``lua/_lib.lua`` it uses (`used_helpers`) and the constants it
shares with Python (`PRELUDE`: `metrics.LUA_CONSTANTS`, the latency histograms' buckets; `states.LUA_CONSTANTS`,
the job states' names), and a script that names the state table's Lua parts gets them too (`states.LUA_TABLES`:
each state's set, terminal, waiting, resubmittable; `state_key`, with `sets` last in its KEYS). A restarted Redis
forgets loaded scripts; `Scripts.run` and `Scripts.run_many` reload them and repeat only the calls that failed.

Each script file begins with its shebang, ``#!lua`` and its Redis 7 flags. When Redis is full (used
memory over `maxmemory` with the `noeviction` policy) it refuses a script without `allow-oom` before
running any of it; only the scripts that add jobs (enqueue.lua, workflow.lua, workflow_restore.lua) go
without. Every other script finishes, moves or removes jobs that are already in Redis, so workers, the
recoverer and operators keep draining the backlog while producers are refused (docs/architecture.md, "When
Redis is full").
"""

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, cast
from weakref import WeakKeyDictionary

import redis
from redis.exceptions import NoScriptError

from jobconsole.core import cluster, metrics, states
from jobconsole.core.keys import PREFIX
from jobconsole.core.wire import Wire

LUA_DIR = Path(__file__).with_name("lua")
KEYS_LINE = "-- KEYS:"  # each script's header names its KEYS in order; store.py fills them in by name
# A script whose header has this line also gets lua/_deps.lua (jobs that wait for other jobs) after the rest,
# with the key root its helpers build other jobs' keys from; the others pay nothing for it.
USES_DEPS_LINE = "-- USES: deps"

# The constants every script shares with Python, ahead of _lib.lua (after the shebang).
PRELUDE = metrics.LUA_CONSTANTS + states.LUA_CONSTANTS
_USES_TABLES = re.compile(r"\b(?:" + "|".join(states.LUA_TABLE_NAMES) + r")\b")

type Arg = str | int | float
type Call = tuple[str, Sequence[str], Sequence[Arg]]


@dataclass(frozen=True, slots=True)
class Script:
    name: str
    source: str
    sha: str
    keys: tuple[str, ...]  # the KEYS its header declares, in order (see store.py for the names)


@cache
def load(name: str) -> Script:
    shebang, _, body = (LUA_DIR / f"{name}.lua").read_text().partition("\n")
    if not shebang.startswith("#!lua"):
        raise ValueError(f"lua/{name}.lua must begin with its '#!lua' line (its flags: allow-oom or none)")
    declared = [line for line in body.splitlines() if line.startswith(KEYS_LINE)]
    if len(declared) != 1:
        raise ValueError(f"lua/{name}.lua must declare its keys in one '{KEYS_LINE} name name ...' line")
    keys = tuple(declared[0].removeprefix(KEYS_LINE).split())
    if "sets" in keys and keys[-1] != "sets":
        raise ValueError(f"lua/{name}.lua must name 'sets' last in its KEYS (state_key counts from the end)")
    tables = states.LUA_TABLES if _USES_TABLES.search(body) else ""
    # Redis reads the flags from the first line only, so the shebang goes before the shared helpers.
    deps = ""
    if USES_DEPS_LINE in body.splitlines():
        # Only the helpers the script uses, as for _lib.lua: claim.lua needs complete_jobs' part of it alone.
        used = used_helpers((LUA_DIR / "_deps.lua").read_text(), tables + body)
        deps = f"local KEY_ROOT = '{PREFIX}:'  -- jobconsole/core/keys.py\n{used}"
    helpers = used_helpers((LUA_DIR / "_lib.lua").read_text(), tables + deps + body)
    source = f"{shebang}\n{PRELUDE}{helpers}\n{tables}{deps}{body}"
    return Script(name, source, hashlib.sha1(source.encode()).hexdigest(), keys)


# A top-level definition of _lib.lua: `local function name(` or `local NAME =` (a constant).
_DEFINITION = re.compile(r"^local (?:function )?([A-Za-z_][\w, ]*?)\s*[=(]")
_WORD = re.compile(r"[A-Za-z_]\w*")
_NOT_CODE = re.compile(r"--.*|'[^']*'|\"[^\"]*\"")  # comments and strings (no script has '--' in a string)


def _words(lua: str) -> set[str]:
    """The names the code uses (a helper is never named in a comment or a string)."""
    return set(_WORD.findall(_NOT_CODE.sub("", lua)))


def used_helpers(lib: str, body: str) -> str:
    """The definitions of `lib` (_lib.lua) that `body` uses, directly or through one another, in their order,
    each with the comment lines just above it. Redis runs a script's whole text on every call, so every helper
    it carries costs each call (the full _lib.lua about 3 µs on Redis 7.0): a script carries only its own."""
    chunks: list[tuple[set[str], list[str]]] = [(set(), [])]
    comments: list[str] = []
    for line in lib.splitlines(keepends=True):
        if match := _DEFINITION.match(line):
            chunks.append(({n.strip() for n in match.group(1).split(",")}, [*comments, line]))
            comments = []
        elif line.startswith("--"):
            comments.append(line)
        else:
            chunks[-1][1].extend([*comments, line])
            comments = []
    chunks[-1][1].extend(comments)
    needed = _words(body)
    kept: list[str] = []
    for names, lines in reversed(chunks):  # a definition can use only those above it
        if names & needed:
            text = "".join(lines)
            kept.append(text)
            needed |= _words(text)
    return "".join(reversed(kept))


def names() -> list[str]:
    return sorted(p.stem for p in LUA_DIR.glob("*.lua") if not p.stem.startswith("_"))


def load_all(client: "redis.Redis") -> None:
    """SCRIPT LOAD every script (one round trip), so that later pipelines meet no NOSCRIPT."""
    if cluster.is_cluster(client):  # on every primary
        cluster.load_scripts(client, [load(name).source for name in names()])
        return
    pipe = client.pipeline(transaction=False)
    for name in names():
        pipe.script_load(load(name).source)
    pipe.execute()


def run(client: "redis.Redis", name: str, keys: Sequence[str], args: Sequence[Arg], *, spin_s: float = 0.0) -> Any:
    """Run one script (one round trip unless Redis forgot the script). Raises what the script raises.
    `spin_s`: wait for the reply spinning, at most that long (wire.py)."""
    reply = run_many(client, [(name, keys, args)], spin_s=spin_s)[0]
    if isinstance(reply, Exception):
        raise reply
    return reply


def run_many(client: "redis.Redis", calls: Sequence[Call], *, spin_s: float = 0.0) -> list[Any]:
    """Run many script calls in one pipelined round trip; results in order, errors as exception values."""
    if not calls:
        return []
    wire = _wire(client)
    results = wire.execute([_evalsha(name, keys, args) for name, keys, args in calls], spin_s)
    missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
    if missing:
        # Redis forgot the scripts (restarted or flushed). A NOSCRIPT call did nothing, so repeating it
        # is safe; it now runs after the calls that succeeded, which every caller tolerates.
        load_all(client)
        retried = wire.execute([_evalsha(*calls[i]) for i in missing])
        for i, r in zip(missing, retried, strict=True):
            results[i] = r
    return results


def commands(client: "redis.Redis", calls: Sequence[Sequence[Arg]], *, spin_s: float = 0.0) -> list[Any]:
    """Plain commands in one pipelined round trip on the hot-path wire (replies as hiredis parses them:
    an HGETALL is a flat list on RESP2); errors as exception values. `spin_s`: as `run`'s."""
    return _wire(client).execute(calls, spin_s)


def _evalsha(name: str, keys: Sequence[str], args: Sequence[Arg]) -> list[Arg]:
    return ["EVALSHA", load(name).sha, len(keys), *keys, *args]


_wires: "WeakKeyDictionary[redis.ConnectionPool, Wire]" = WeakKeyDictionary()


def _wire(client: "redis.Redis") -> Wire:
    try:
        pool = client.connection_pool
    except AttributeError:  # a RedisCluster: batches split by node (cluster.py)
        return cast(Wire, cluster.wire(cast(Any, client)))
    wire = _wires.get(pool)
    if wire is None:
        wire = _wires[pool] = Wire(client)
    return wire


def run_many_replicated(
    client: "redis.Redis", calls: Sequence[Call], replicas: int, timeout_ms: int, *, spin_s: float = 0.0
) -> tuple[list[Any], int]:
    """`run_many`, then WAIT `replicas` `timeout_ms` in the same write on the same connection (so no extra
    round trip): the results, and how many replicas acknowledged every write of that connection so far."""
    wire = _wire(client)
    wait: list[Arg] = ["WAIT", replicas, timeout_ms]
    results = wire.execute([*(_evalsha(name, keys, args) for name, keys, args in calls), wait], spin_s)
    acknowledged = results.pop()
    missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
    if missing:  # as in run_many; the retried calls' own WAIT counts then
        load_all(client)
        retried = wire.execute([*(_evalsha(*calls[i]) for i in missing), wait])
        acknowledged = retried.pop()
        for i, r in zip(missing, retried, strict=True):
            results[i] = r
    if isinstance(acknowledged, Exception):
        raise acknowledged
    return results, int(acknowledged)
