"""Helpers for tests that run real processes: a process tree read from /proc, and waiting with logs."""

import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, ...), or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def alive(pid: int) -> bool:
    """Running, sleeping or stopped: a zombie (exited, not yet reaped) counts as gone."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (children, grandchildren...), whatever session they moved to."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            children[int(fields[1])].append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def wait_until[T](condition: Callable[[], T], timeout: float, what: str, log: Callable[[], str] = str) -> T:
    """Poll `condition` until it returns something truthy; on timeout fail with the tail of `log()`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n--- log:\n{log()[-6000:]}")
        time.sleep(0.05)
