"""Concurrency groups and queue limits: what they are, as data (the worker's claim path is worker/groups.py).

A group (Runqueue's `external_groups`) caps its jobs running at once across every worker and server
(`connections`), and optionally its starts per period (`requests`: n per second, minute or hour). Groups span
queues and tasks; a task names its group (`@task(group=...)`) and a job may name another (`group=` on enqueue).
A queue limit caps the running jobs of one queue across workers.
"""

from dataclasses import dataclass
from typing import Any

from jobconsole.core.keys import NAME_PATTERN

PERIODS_MS = {"second": 1000, "minute": 60_000, "hour": 3_600_000}


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    connections: int = 0  # jobs of the group running at once, across all workers (0: no cap)
    requests: int = 0  # starts per period (0: no rate limit)
    period_ms: int = 1000

    def __post_init__(self) -> None:
        if not NAME_PATTERN.match(self.name):
            raise ValueError(f"invalid group name {self.name!r} (letters, digits, '_.-', at most 100)")
        if self.connections < 0 or self.requests < 0 or self.period_ms <= 0:
            raise ValueError(f"group {self.name}: connections and requests must be >= 0, the period positive")
        if not self.connections and not self.requests:
            raise ValueError(f"group {self.name}: give connections, requests or both")

    @classmethod
    def parse(cls, name: str, spec: dict[str, Any]) -> "Group":
        """A group from settings: {"connections": 2, "requests": [10, "second"]} (Runqueue's form
        [n, per, unit], e.g. [100, 1, "minute"], is accepted too)."""
        unknown = set(spec) - {"connections", "requests"}
        if unknown:
            raise ValueError(f"group {name}: unknown option(s) {', '.join(sorted(unknown))}")
        connections = spec.get("connections", 0)
        if not isinstance(connections, int) or isinstance(connections, bool):
            raise ValueError(f"group {name}: connections must be a whole number")
        requests, period_ms = 0, 1000
        raw = spec.get("requests")
        if raw is not None:
            requests, period_ms = _rate(name, raw)
        return cls(name, connections, requests, period_ms)


def _rate(name: str, raw: Any) -> tuple[int, int]:
    """[n, unit] or [n, per, unit] → (n, period in ms)."""
    if not isinstance(raw, (list, tuple)) or len(raw) not in (2, 3):
        raise ValueError(f"group {name}: requests must be [n, unit] or [n, per, unit], e.g. [10, 'second']")
    n, unit = raw[0], str(raw[-1]).lower().removesuffix("s")
    per = raw[1] if len(raw) == 3 else 1
    for value in (n, per):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"group {name}: requests needs positive whole numbers, got {raw!r}")
    if unit not in PERIODS_MS:
        raise ValueError(f"group {name}: requests unit must be second, minute or hour, got {raw[-1]!r}")
    return n, per * PERIODS_MS[unit]
