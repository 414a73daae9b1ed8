"""The database connections of the long-lived threads: task threads, the mirror and its commit thread, the
periodic scheduler, bulk operations. Django replaces a stale connection around each request (close_old_connections
on request_started and request_finished); these threads serve no requests, so without this a connection the
database dropped (a restart, a failover, pg_terminate_backend) stays broken in its thread until the process exits.

* Around each sync task the worker calls close_old_connections on the task's thread (task_hooks(), installed by
  runworker through the engine's TaskHooks): it closes a connection past CONN_MAX_AGE, or one an error has left
  unusable, and re-arms CONN_HEALTH_CHECKS so that the task's first query checks a reused connection.
* The loops (the mirror, the scheduler, a bulk operation) catch the error of a dropped connection, close the
  thread's broken connections with close_broken(), log one line (connection_lost) and retry their step, which is
  idempotent: the next query opens a new connection.
"""

import logging
import threading

from django.db import DatabaseError, InterfaceError, OperationalError, close_old_connections, connections
from django.db.backends.signals import connection_created

from jobconsole.core.hooks import TaskHooks

log = logging.getLogger("jobconsole.db")

# What a dropped connection raises (psycopg: "terminating connection due to administrator command", "the connection
# is closed", "server closed the connection unexpectedly"; a database down: "connection refused"), among others.
CONNECTION_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError)
# PostgreSQL's SQLSTATEs of a session ended by the server: class 08 (connection exception), and an administrator's
# or a crash's shutdown, or a server still starting (57P01-57P03). A lock or statement timeout is not one of them.
LOST_SQLSTATES = frozenset({"57P01", "57P02", "57P03"})
DRIVERS = frozenset({"psycopg", "psycopg2"})


_thread = threading.local()


def _connected(**kwargs: object) -> None:
    """connection_created, sent on the thread that connects: this thread has a connection to look after."""
    _thread.connected = True


connection_created.connect(_connected, dispatch_uid="jobconsole.db_connections")


def housekeeping() -> None:
    """close_old_connections, on a thread that has connected to a database. On one that never did it finds nothing,
    but looking (an asgiref Local per alias) costs several times this check, twice per job: a no-op task's budget."""
    if getattr(_thread, "connected", False):
        close_old_connections()


def task_hooks() -> TaskHooks:
    """What runworker gives its workers: a request cycle's connection housekeeping around each sync task."""
    return TaskHooks(before=housekeeping, after=housekeeping)


def close_broken() -> bool:
    """Close this thread's connections that no longer work (no round trip for one Django closed already);
    True if there was one. A working connection (the error was a lock timeout, a deadlock) is kept."""
    broken = False
    for conn in connections.all(initialized_only=True):
        if conn.in_atomic_block:
            continue  # closing it would break the caller's transaction: the caller's rollback deals with it
        if conn.connection is None:
            broken = broken or conn.errors_occurred  # Django closed it after a failed rollback
            continue
        if conn.is_usable():
            continue
        broken = True
        try:
            conn.close()
        except DatabaseError:
            pass  # close() forgets the connection whatever happens: the next query connects afresh
    return broken


def is_lost_connection(exc: BaseException) -> bool:
    """`exc` says the session is gone, not that a statement failed in a working one. Django often reconnects at
    once (leaving an atomic block whose rollback failed), so the error is all that tells."""
    if not isinstance(exc, CONNECTION_ERRORS):
        return False
    cause = exc.__cause__
    state = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    if state:
        return state.startswith("08") or state in LOST_SQLSTATES
    # No SQLSTATE from a PostgreSQL driver: the client's own error (closed, refused, unexpected end of file).
    return type(cause).__module__.split(".")[0] in DRIVERS


def connection_lost(where: str, exc: BaseException) -> None:
    """The one line logged per recovery."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    log.warning("database connection lost (%s: %s); reconnecting", where, message)


def recover(where: str, exc: BaseException) -> bool:
    """After `exc` in this thread: close this thread's broken connections; if `exc` was a dropped connection, log
    it and return True (the caller retries its step, and its next query connects afresh); False for any other."""
    broken = isinstance(exc, CONNECTION_ERRORS) and close_broken()
    if not (broken or is_lost_connection(exc)):
        return False
    connection_lost(where, exc)
    return True
