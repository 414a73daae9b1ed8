"""jobconsole.W001: connections kept across jobs without a health check (jobconsole/checks.py)."""

from jobconsole.checks import unchecked_reuse

POSTGRES = "django.db.backends.postgresql"


def test_kept_connections_without_health_checks_are_warned_about() -> None:
    warnings = unchecked_reuse({"default": {"ENGINE": POSTGRES, "CONN_MAX_AGE": 60}})
    assert [w.id for w in warnings] == ["jobconsole.W001"]
    assert "CONN_MAX_AGE=60" in warnings[0].msg and "CONN_HEALTH_CHECKS" in (warnings[0].hint or "")
    assert [w.id for w in unchecked_reuse({"default": {"ENGINE": POSTGRES, "CONN_MAX_AGE": None}})] == [
        "jobconsole.W001"
    ]


def test_fresh_or_checked_connections_and_sqlite_are_fine() -> None:
    assert unchecked_reuse({"default": {"ENGINE": POSTGRES}}) == []  # CONN_MAX_AGE 0: a new one per job
    assert unchecked_reuse({"default": {"ENGINE": POSTGRES, "CONN_MAX_AGE": 60, "CONN_HEALTH_CHECKS": True}}) == []
    assert unchecked_reuse({"default": {"ENGINE": "django.db.backends.sqlite3", "CONN_MAX_AGE": 60}}) == []


def test_the_projects_settings_pass() -> None:
    from django.conf import settings

    assert unchecked_reuse(settings.DATABASES) == []
