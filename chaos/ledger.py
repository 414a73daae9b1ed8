"""The ledger: an SQLite (WAL) file outside Redis that the harness and every worker process write to.

It records what the checker needs to judge Redis from the outside: every job a producer got accepted (and
every one refused because its unique key was held), every execution a task began and ended, every side effect
(by idempotency key), and every fault injected.
A committed row survives a SIGKILL of the writer (WAL data sits in the OS page cache), so a task killed
right after writing still leaves its trace.
"""

import os
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# Set by the harness on a process whose clock it skewed (seconds): the ledger records true time.
SKEW_ENV = "CHAOS_CLOCK_SKEW_S"
_SKEW = float(os.environ.get(SKEW_ENV) or 0)


def _now() -> float:
    return time.time() - _SKEW


ENV = "CHAOS_LEDGER"  # worker processes find the ledger through this variable

SCHEMA = """
CREATE TABLE IF NOT EXISTS accepted (
    job_id TEXT PRIMARY KEY, task TEXT NOT NULL, expect TEXT NOT NULL, not_before REAL NOT NULL,
    accepted_at REAL NOT NULL, unique_key TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS duplicates (
    job_id TEXT NOT NULL, unique_key TEXT NOT NULL, holder TEXT NOT NULL, sent_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS executions (
    id INTEGER PRIMARY KEY, job_id TEXT NOT NULL, attempt INTEGER NOT NULL, token TEXT NOT NULL,
    worker TEXT NOT NULL, pid INTEGER NOT NULL, started REAL NOT NULL, ended REAL, outcome TEXT
);
CREATE INDEX IF NOT EXISTS executions_job ON executions (job_id);
CREATE TABLE IF NOT EXISTS effects (key TEXT PRIMARY KEY, job_id TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS effect_attempts (
    key TEXT NOT NULL, job_id TEXT NOT NULL, pid INTEGER NOT NULL, at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS faults (
    id INTEGER PRIMARY KEY, kind TEXT NOT NULL, pids TEXT NOT NULL, started REAL NOT NULL, ended REAL
);
"""


@dataclass(frozen=True, slots=True)
class Accepted:
    job_id: str
    task: str
    expect: str  # 'completed' or 'dead' (poison jobs, garbled payloads)
    not_before: float  # a lower bound of the job's run_at (wall clock, seconds)
    accepted_at: float = 0.0  # when the ledger recorded it (set by the ledger; wall clock, seconds)
    unique_key: str = ""


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A job the enqueue refused because its unique key was held: `holder` is the live job Redis named."""

    job_id: str
    unique_key: str
    holder: str
    sent_at: float  # when the producer sent it (wall clock, seconds): Redis decided after this


@dataclass(frozen=True, slots=True)
class Execution:
    job_id: str
    attempt: int
    token: str
    worker: str
    pid: int
    started: float
    ended: float | None  # None: the process died inside the task
    outcome: str | None


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str  # kill, term, stop, redis_kill, redis_stop, cut, blackhole, delay, ...
    pids: frozenset[int]  # worker processes it hit directly (empty for Redis and network faults)
    started: float
    ended: float


class Ledger:
    """One connection per thread; every write is its own short transaction."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        self._local = threading.local()
        self._db().executescript(SCHEMA)

    @classmethod
    def from_env(cls) -> "Ledger":
        return cls(os.environ[ENV])

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            # Many processes write at once: wait for the lock instead of failing; synchronous=NORMAL is
            # durable against process crashes (not power loss), which is all these faults need.
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        return db

    # --- writers (harness) --------------------------------------------------------------------------

    def accept(self, jobs: Iterable[Accepted]) -> None:
        now = _now()
        rows = [(a.job_id, a.task, a.expect, a.not_before, now, a.unique_key) for a in jobs]
        db = self._db()
        with db:
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT OR IGNORE INTO accepted VALUES (?, ?, ?, ?, ?, ?)", rows)

    def duplicate(self, refused: Iterable[Duplicate]) -> None:
        rows = [(d.job_id, d.unique_key, d.holder, d.sent_at) for d in refused]
        if not rows:  # the usual batch: no write lock taken for nothing
            return
        db = self._db()
        with db:
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT INTO duplicates VALUES (?, ?, ?, ?)", rows)

    def fault(self, kind: str, pids: Iterable[int], started: float, ended: float | None = None) -> int:
        ids = ",".join(str(p) for p in pids)
        cur = self._db().execute(
            "INSERT INTO faults (kind, pids, started, ended) VALUES (?, ?, ?, ?)", (kind, ids, started, ended)
        )
        return int(cur.lastrowid or 0)

    def fault_ended(self, fault_id: int, ended: float) -> None:
        self._db().execute("UPDATE faults SET ended = ? WHERE id = ?", (ended, fault_id))

    # --- writers (tasks, in worker processes) -------------------------------------------------------

    def began(self, job_id: str, attempt: int, token: str, ago: float = 0.0) -> int:
        """An execution began `ago` seconds before now."""
        worker = token.rsplit(":", 1)[0]  # a lease token is '<worker id>:<sequence or, when handed off, job id>'
        cur = self._db().execute(
            "INSERT INTO executions (job_id, attempt, token, worker, pid, started) VALUES (?, ?, ?, ?, ?, ?)",
            (job_id, attempt, token, worker, os.getpid(), _now() - ago),
        )
        return int(cur.lastrowid or 0)

    def ended(self, execution_id: int, outcome: str) -> None:
        self._db().execute("UPDATE executions SET ended = ?, outcome = ? WHERE id = ?", (_now(), outcome, execution_id))

    def side_effect(self, key: str, job_id: str) -> bool:
        """Apply an idempotent side effect; True if this call applied it. Raw attempts are counted apart."""
        db = self._db()
        now = _now()
        with db:
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO effect_attempts VALUES (?, ?, ?, ?)", (key, job_id, os.getpid(), now))
            cur = db.execute("INSERT OR IGNORE INTO effects VALUES (?, ?, ?)", (key, job_id, now))
        return cur.rowcount == 1

    # --- readers (checker) --------------------------------------------------------------------------

    def accepted(self) -> list[Accepted]:
        rows = self._db().execute("SELECT job_id, task, expect, not_before, accepted_at, unique_key FROM accepted")
        return [Accepted(*row) for row in rows]

    def duplicates(self) -> list[Duplicate]:
        rows = self._db().execute("SELECT job_id, unique_key, holder, sent_at FROM duplicates")
        return [Duplicate(*row) for row in rows]

    def executions(self) -> list[Execution]:
        rows = self._db().execute(
            "SELECT job_id, attempt, token, worker, pid, started, ended, outcome FROM executions ORDER BY started"
        )
        return [Execution(*row) for row in rows]

    def faults(self) -> list[Fault]:
        rows = self._db().execute("SELECT kind, pids, started, COALESCE(ended, started) FROM faults ORDER BY started")
        return [Fault(kind, frozenset(int(p) for p in pids.split(",") if p), s, e) for kind, pids, s, e in rows]

    def effect_counts(self) -> tuple[int, int, int]:
        """(keys applied, raw attempts, duplicated keys). The key is the producer's logical request id, not
        the job id: a key attempted by two different jobs means one request became two jobs (an enqueue
        retried after a lost reply that was not idempotent), so its effect happened twice."""
        db = self._db()
        applied = db.execute("SELECT COUNT(*) FROM effects").fetchone()[0]
        raw = db.execute("SELECT COUNT(*) FROM effect_attempts").fetchone()[0]
        dup = db.execute(
            "SELECT COUNT(*) FROM (SELECT key FROM effect_attempts GROUP BY key HAVING COUNT(DISTINCT job_id) > 1)"
        ).fetchone()[0]
        return int(applied), int(raw), int(dup)

    def close(self) -> None:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None
