"""Dropping the database's sessions as a PostgreSQL restart or failover would, for the tests of the workers,
the mirror, the scheduler and bulk operations surviving it (jobconsole/db_connections.py)."""

import psycopg
import pytest
from django.conf import settings
from django.db import connection

TERMINATE = (
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


def require_postgres() -> None:
    if not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        pytest.skip("pg_terminate_backend needs PostgreSQL: set DATABASE_URL to a PostgreSQL database")


def terminate_backends(*, keep_own: bool = False) -> int:
    """pg_terminate_backend every session of the test database but the one this opens to do it; returns how many.
    This thread's Django connection is one of them: closed here, so that its next query opens a new one, unless
    `keep_own` (the code under test in this thread must then find out by itself)."""
    s = connection.settings_dict
    with psycopg.connect(
        host=s["HOST"] or "127.0.0.1", port=s["PORT"] or 5432, user=s["USER"], password=s["PASSWORD"] or None,
        dbname=s["NAME"], autocommit=True,
    ) as killer:  # fmt: skip
        killed = sum(1 for (done,) in killer.execute(TERMINATE).fetchall() if done)
    if not keep_own:
        connection.close()
    return killed


def sessions() -> set[int]:
    """The pids of the test database's other sessions (the test's own query's is left out)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return {pid for (pid,) in cursor.fetchall()}
