"""The project's settings for the test run (pytest's DJANGO_SETTINGS_MODULE): project.settings plus what only
tests need. `manage.py` subprocesses of the tests use project.settings itself (tests/conftest.py manage_env)."""

import os

# Set before project.settings reads it, and inherited by the subprocesses that tests start.
SECRET_KEY_FOR_TESTS = "tests-only-" + "not-a-secret-" * 4
os.environ.setdefault("SECRET_KEY", SECRET_KEY_FOR_TESTS)

from project.settings import *  # noqa: E402, F403
from project.settings import DATABASES, STORAGES, TASKS, VAR_DIR  # noqa: E402

# Templates name static files; the manifest storage of production would need a collectstatic run first.
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file (not :memory:) so that mirror and worker subprocesses can share the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test_jobconsole_{os.getpid()}.sqlite3")}

# The test client speaks plain HTTP.
SECURE_SSL_REDIRECT = False

# A second backend of Django's task framework, whose tasks retry once (tests/app/test_django_tasks.py).
TASKS = {
    **TASKS,
    "retrying": {
        "BACKEND": "jobconsole.django_backend.JobconsoleBackend",
        "QUEUES": ["retrying"],
        "OPTIONS": {"max_retries": 1, "retry_delay": 0},
    },
}
