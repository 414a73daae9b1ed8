"""Django settings. Production reads DATABASE_URL, REDIS_URL, SECRET_KEY, ALLOWED_HOSTS, DEBUG from the
environment; every default is listed in README.md."""

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("JOBCONSOLE_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)  # SQLite and the embedded Redis live here


def _env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).lower() in {"1", "true", "yes", "on"}


def _default_redis_url() -> str:
    """REDIS_URL, else the embedded Redis that `make run` started (it writes var/redis.url)."""
    if url := os.environ.get("REDIS_URL"):
        return url
    written = VAR_DIR / "redis.url"
    if written.exists():
        return written.read_text().strip()
    return "redis://127.0.0.1:6379/0"


DEBUG = _env_bool("DEBUG", True)
SECRET_KEY = os.environ.get("SECRET_KEY", "dev-only-insecure-key-change-me")
ALLOWED_HOSTS = [h for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "jobconsole",
    "dashboards",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "jobconsole.urls"
WSGI_APPLICATION = "jobconsole.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'jobconsole.sqlite3'}"), conn_max_age=60
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # WAL lets the console read while the mirror writes.
    DATABASES["default"].setdefault("OPTIONS", {})["init_command"] = (
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
    )
    # The mirror writes while the console and admin write too: take the write lock when a transaction
    # starts (no lock-upgrade deadlocks) and wait for it rather than failing at once.
    DATABASES["default"]["OPTIONS"].update({"transaction_mode": "IMMEDIATE", "timeout": 20})
    # Tests use a file (not :memory:) so that mirror and worker subprocesses can share the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test_jobconsole_{os.getpid()}.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"  # collectstatic fills it (make run); WhiteNoise serves it
STATIC_ROOT.mkdir(exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]

LOGIN_URL = "admin:login"
X_FRAME_OPTIONS = "DENY"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# The engine's settings; every key and its default is documented in README.md (Configuration).
JOBCONSOLE = {
    "REDIS_URL": _default_redis_url(),
    "TASK_MODULES": [m for m in os.environ.get("JOBCONSOLE_TASK_MODULES", "jobconsole.examples").split(",") if m],
    "STRICT_ENQUEUE": True,
    "CLIENT_SPIN_US": int(os.environ.get("JOBCONSOLE_CLIENT_SPIN_US", "200")),
    "EVENTS_MAXLEN": 100_000,
    "WORKER_CONCURRENCY": int(os.environ.get("WORKER_CONCURRENCY", "10")),
    "SHUTDOWN_GRACE": 10.0,
    "RETENTION": {
        "completed": 86_400,
        "failed": 7 * 86_400,
        "cancelled": 86_400,
        "dropped": 30 * 86_400,
        "dead": 30 * 86_400,
    },
    # The database mirror, its retention and the outbox (defaults in jobconsole/mirror/config.py).
    "MIRROR": {
        "IN_WORKER": _env_bool("JOBCONSOLE_MIRROR_IN_WORKER", True),
        "BATCH": 1000,
        "BLOCK_MS": 100,
        "LOCK_TTL": float(os.environ.get("JOBCONSOLE_MIRROR_LOCK_TTL", "10")),
        "RETENTION_EVERY": 300.0,
        "RELAY_EVERY": 2.0,
    },
    "DB_RETENTION": {
        "completed": 30 * 86_400,
        "failed": 30 * 86_400,
        "cancelled": 30 * 86_400,
        "dropped": 90 * 86_400,
        "dead": 90 * 86_400,
        "audit": 365 * 86_400,
    },
    "OUTBOX": {"RELAY_AFTER": 5.0, "KEEP_PUBLISHED": 7 * 86_400},
}
