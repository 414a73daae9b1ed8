"""The Lua scripts: one file per atomic operation, loaded once, run by SHA with a NOSCRIPT fallback.

Every script is prefixed with ``lua/_lib.lua`` (shared helpers). A restarted Redis forgets loaded
scripts; `Scripts.run` and `Scripts.run_many` reload them and repeat only the calls that failed.
"""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import redis
from redis.exceptions import NoScriptError

LUA_DIR = Path(__file__).with_name("lua")

type Arg = str | int | float
type Call = tuple[str, Sequence[str], Sequence[Arg]]


@dataclass(frozen=True, slots=True)
class Script:
    name: str
    source: str
    sha: str


@cache
def load(name: str) -> Script:
    source = (LUA_DIR / "_lib.lua").read_text() + "\n" + (LUA_DIR / f"{name}.lua").read_text()
    return Script(name, source, hashlib.sha1(source.encode()).hexdigest())


def names() -> list[str]:
    return sorted(p.stem for p in LUA_DIR.glob("*.lua") if not p.stem.startswith("_"))


def load_all(client: "redis.Redis") -> None:
    """SCRIPT LOAD every script (one round trip), so that later pipelines meet no NOSCRIPT."""
    pipe = client.pipeline(transaction=False)
    for name in names():
        pipe.script_load(load(name).source)
    pipe.execute()


def run(client: "redis.Redis", name: str, keys: Sequence[str], args: Sequence[Arg]) -> Any:
    """Run one script (one round trip unless Redis forgot the script)."""
    script = load(name)
    try:
        return client.evalsha(script.sha, len(keys), *keys, *args)
    except NoScriptError:
        return client.eval(script.source, len(keys), *keys, *args)


def run_many(client: "redis.Redis", calls: Sequence[Call]) -> list[Any]:
    """Run many script calls in one pipelined round trip; results in order, errors as exception values."""
    if not calls:
        return []
    pipe = client.pipeline(transaction=False)
    for name, keys, args in calls:
        pipe.evalsha(load(name).sha, len(keys), *keys, *args)
    results: list[Any] = pipe.execute(raise_on_error=False)
    missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
    if missing:
        # Redis forgot the scripts (restarted or flushed). A NOSCRIPT call did nothing, so repeating it
        # is safe; it now runs after the calls that succeeded, which every caller tolerates.
        load_all(client)
        pipe = client.pipeline(transaction=False)
        for i in missing:
            name, keys, args = calls[i]
            pipe.evalsha(load(name).sha, len(keys), *keys, *args)
        for i, r in zip(missing, pipe.execute(raise_on_error=False), strict=True):
            results[i] = r
    return results
