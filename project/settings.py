"""Settings of this repository's site: the console, the admin and the workers (`make run`, the Procfile).

Everything a deployment changes comes from the environment:

    SECRET_KEY            required in production. With DEBUG on and no key, one is made once into var/secret_key;
                          without DEBUG a var/secret_key that `make run` made is used when present (so commands in
                          a second shell beside it work as the README writes them); neither: the settings refuse
    DEBUG                 off unless 1/true/yes/on (`make run` turns it on)
    ALLOWED_HOSTS         comma-separated, default 127.0.0.1,localhost
    CSRF_TRUSTED_ORIGINS  comma-separated origins such as https://jobs.example.com (behind a proxy)
    DATABASE_URL          default SQLite in var/ (WAL)
    TIME_ZONE, LOG_LEVEL  default UTC, INFO
    JOBCONSOLE_VAR_DIR    where SQLite, the embedded Redis of `make run` and var/secret_key live (owner-only)
    With DEBUG off, HTTPS: SECURE_SSL_REDIRECT (on), SECURE_HSTS_SECONDS (3600),
    SECURE_HSTS_INCLUDE_SUBDOMAINS (on), SECURE_HSTS_PRELOAD (off).
    SECURE_PROXY_SSL_HEADER (unset; read whatever DEBUG is): the header a TLS-terminating proxy sets, e.g.
    HTTP_X_FORWARDED_PROTO, meaning "https" when it says so.

The engine's own settings (REDIS_URL, WORKER_CONCURRENCY, JOBCONSOLE_*...) and their environment variables are
in jobconsole/conf.py; this file sets only what differs from their defaults.
"""

import os
import secrets
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from project import var_dir

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("JOBCONSOLE_VAR_DIR", BASE_DIR / "var"))
var_dir.protect(VAR_DIR)  # SQLite, the DEBUG key and the embedded Redis live here: owner-only (project/var_dir.py)


def _env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def _local_secret_key(create: bool) -> str:
    """The checkout's own key in var/secret_key, so that sessions survive restarts of `make run`. Only DEBUG makes
    one (owner-only, once, even when processes start together); without DEBUG one already there (made by
    `make run`) is read, and "" means there is none."""
    path = VAR_DIR / "secret_key"
    if not create and not path.exists():
        return ""
    return var_dir.read_or_create(path, lambda: secrets.token_urlsafe(50)).strip()


DEBUG = _env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY", "") or _local_secret_key(create=DEBUG)
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY is not set. In production set the SECRET_KEY environment variable to 50 or more random "
        "characters (python -c 'import secrets; print(secrets.token_urlsafe(50))'); for local use set DEBUG=1."
    )
ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS")

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
    "jobconsole_api",  # the HTTP API: the native JSON API (/api/v1/), the seed systems' interfaces, /metrics
    "project",  # its tasks.py registers the example tasks of `make run`'s demo
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
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

# Connections are kept a minute, and checked before their first use in each request or job (a database restarted
# meanwhile costs nothing: see docs/production.md, "Database restarts and failover").
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'jobconsole.sqlite3'}"),
        conn_max_age=60,
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    if (name := str(DATABASES["default"]["NAME"] or "")) and name != ":memory:" and not name.startswith("file:"):
        # Made 0600 before SQLite would make it 0644; its -wal and -shm files then get the same mode.
        var_dir.private_file(Path(name))
    # WAL lets the console read while the mirror writes.
    DATABASES["default"].setdefault("OPTIONS", {})["init_command"] = (
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
    )
    # The mirror writes while the console and admin write too: take the write lock when a transaction
    # starts (no lock-upgrade deadlocks) and wait for it rather than failing at once.
    DATABASES["default"]["OPTIONS"].update({"transaction_mode": "IMMEDIATE", "timeout": 20})

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"  # collectstatic fills it (make run, and a deployment's build step)
STATIC_ROOT.mkdir(exist_ok=True)  # WhiteNoise warns at start-up about a missing one
STORAGES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Hashed, compressed copies that WhiteNoise serves with far-future cache headers, named by their hashed
    # names with DEBUG on too (`make run` runs collectstatic at each start; project/static_storage.py). With DEBUG
    # off a page that names a static file needs collectstatic to have run (it writes the manifest).
    "staticfiles": {"BACKEND": "project.static_storage.CollectedStaticFilesStorage"},
}

LOGIN_URL = "admin:login"
X_FRAME_OPTIONS = "DENY"
# No inline script anywhere (the console's one script is a static file). Styles may be inline: plotly.js and
# the admin set style attributes. Images may be data: URLs (plotly's mode bar icons).
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "font-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

if not DEBUG:
    # HTTPS only. Load balancers probe /healthz over plain HTTP, so it is not redirected.
    SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    # A small HSTS max-age by default, so that a wrong choice of domain wears off quickly; raise it once sure.
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "3600"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = _env_bool("SECURE_HSTS_PRELOAD", False)
    if not SECURE_HSTS_PRELOAD:
        # Asking browsers to preload the domain is its owner's decision, not a default.
        SILENCED_SYSTEM_CHECKS = ["security.W021"]
if header := os.environ.get("SECURE_PROXY_SSL_HEADER"):
    # Only behind a proxy that sets this header itself (and strips it from clients' requests).
    SECURE_PROXY_SSL_HEADER = (header, "https")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# The engine's settings: every key, its default and its environment variable are in jobconsole/conf.py.
JOBCONSOLE: dict[str, Any] = {}
if "REDIS_URL" not in os.environ and (VAR_DIR / "redis.url").exists():
    # Shells beside `make run` (manage.py enqueue, shell) find its embedded Redis through this file.
    JOBCONSOLE["REDIS_URL"] = (VAR_DIR / "redis.url").read_text().strip()

# Django's task framework (django.tasks): `@task` functions of any installed app's tasks.py enqueue into Jobconsole
# and run on its workers (jobconsole/django_backend.py).
TASKS = {"default": {"BACKEND": "jobconsole.django_backend.JobconsoleBackend"}}
