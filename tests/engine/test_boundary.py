"""The engine's Redis boundary: scripts declare their keys by name, and nothing outside the engine names a key
or runs a script (the Django layer reads through core/queries/ and writes through the client and store)."""

import ast
import re
from pathlib import Path

import pytest
from redis.crc import key_slot

from jobconsole.core import scripts
from jobconsole.core.keys import QueueKeys, queue_keys
from jobconsole.core.store import _fill, group_script_keys, script_keys

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "jobconsole" / "core"
PRIVATE = {"jobconsole.core.keys", "jobconsole.core.scripts", "jobconsole.core.wire"}
GLOBAL_SCRIPTS = {"announce", "lock", "mirror_epoch", "mirror_read", "periodic", "register_worker", "worker_control"}


def _product_modules() -> list[Path]:
    """Every module of the Django layer: the jobconsole app outside the engine, and the console."""
    paths = [p for p in (ROOT / "jobconsole").rglob("*.py") if ENGINE not in p.parents]
    return paths + [p for app in ("dashboards", "jobconsole_api") for p in (ROOT / app).rglob("*.py")]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_nothing_outside_the_engine_imports_its_key_or_script_modules() -> None:
    found = {str(p.relative_to(ROOT)): sorted(_imports(p) & PRIVATE) for p in _product_modules()}
    assert {path: names for path, names in found.items() if names} == {}
    assert len(found) > 20  # the walk did find the Django layer


def test_nothing_outside_the_engine_spells_a_key() -> None:
    spelled = [str(p.relative_to(ROOT)) for p in _product_modules() if "jc:{" in p.read_text()]
    assert spelled == []


def test_nothing_outside_the_engine_sends_redis_a_command() -> None:
    """The Django layer hands a connection to the engine's objects, and calls nothing on it itself."""
    sent = [
        f"{p.relative_to(ROOT)}: {m.group(0)}"
        for p in _product_modules()
        for m in re.finditer(r"(?:\.redis|get_redis\(\))\.\w+\(", p.read_text())
    ]
    assert sent == []


@pytest.mark.parametrize("name", scripts.names())
def test_every_script_declares_keys_the_store_can_fill(name: str) -> None:
    declared = scripts.load(name).keys
    assert declared, f"lua/{name}.lua declares no keys"
    if name in GLOBAL_SCRIPTS:
        return  # the store passes these keys itself
    named = {"finished": queue_keys("emails").sets["dead"]} if name == "trim" else {}
    if name.startswith("workflow"):  # a workflow's record, in the slot of its first step's queue
        named = {"wf_record": queue_keys("emails").workflow("01J00000000000000000000000")}
    if name.startswith("group_"):  # a concurrency group's scripts: the group's own slot
        keys = list(group_script_keys(name, "payments"))
    elif named:
        keys = _fill(name, queue_keys("emails"), named)
    else:
        keys = list(script_keys(name, "emails", "host:1:abc"))
    assert len({key_slot(k.encode()) for k in keys}) == 1, keys  # one cluster slot per script call
    highest = max((int(n) for n in re.findall(r"KEYS\[(\d+)\]", scripts.load(name).source)), default=0)
    assert highest <= len(keys)  # the script reads no key its header does not declare


def test_a_drain_block_fills_in_as_drain_intake_at_reads_it() -> None:
    k: QueueKeys = queue_keys("emails")
    keys = script_keys("heartbeat", "emails")
    assert list(keys) == [k.active, k.events, k.intake, k.ready, k.seq, k.events, k.stats, k.active]


@pytest.mark.parametrize("name", scripts.names())
def test_a_script_carries_the_helpers_it_calls_and_no_others(name: str) -> None:
    """Redis runs a script's whole text on each call: a helper of _lib.lua it never calls is a cost for nothing,
    and one it calls but does not carry would fail at run time (a global)."""
    source = scripts.load(name).source
    lib = (scripts.LUA_DIR / "_lib.lua").read_text()
    helpers = set(re.findall(r"^local function (\w+)\(", lib, re.M))
    carried = set(re.findall(r"^local function (\w+)\(", source, re.M)) & helpers
    body = re.sub(r"--.*|'[^']*'|\"[^\"]*\"", "", source.split("\n", 1)[1])  # code: no comments, no strings
    called = {
        h for h in helpers if re.search(rf"(?<![\w.]){h}\(", re.sub(rf"^local function {h}\(", "", body, flags=re.M))
    }
    assert called <= carried
    assert carried <= called, f"{name} carries {sorted(carried - called)} without calling them"
