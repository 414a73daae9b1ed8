"""Logs that help with no configuration: runworker's start-up line and a handler for the jobconsole logger.

A project without a LOGGING setting has no handler on the root logger (Django configures only its own "django"
logger), so the engine's INFO lines (a job failed and will retry, a worker started) went nowhere. At start,
runworker gives the "jobconsole" logger a stderr handler at JOBCONSOLE["LOG_LEVEL"], unless the project's logging
already configures it or the root logger: then its configuration decides, untouched."""

import logging
import os
import re
import sys

LOGGER = "jobconsole"
FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
_PASSWORD = re.compile(r"(?<=://)([^:@/]*):[^@/]*@")  # user:password@ (or :password@) after the scheme
_QUERY_PASSWORD = re.compile(r"(password=)[^&]*")  # ?sentinel_password=... of a Sentinel URL


def ensure_handler(level: str) -> bool:
    """Attach a stderr handler to the jobconsole logger when nothing would print its records; True if it did."""
    logger = logging.getLogger(LOGGER)
    if logger.handlers or logging.getLogger().handlers:
        return False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    return True


def without_password(url: str) -> str:
    """A Redis URL fit for a log line: redis://:***@host:6379/0 (every host of a multi-host URL too)."""
    return _QUERY_PASSWORD.sub(r"\1***", _PASSWORD.sub(lambda m: f"{m.group(1)}:***@", url))


def announce_worker(worker_id: str, queues: list[str], concurrency: int, redis_url: str, extras: list[str]) -> None:
    """The one line a starting runworker writes: what it serves, where, and its pid."""
    logging.getLogger("jobconsole.runworker").info(
        "runworker started pid=%d worker=%s queues=%s concurrency=%d redis=%s%s",
        os.getpid(),
        worker_id,
        ",".join(queues),
        concurrency,
        without_password(redis_url),
        "".join(f" {extra}" for extra in extras),
    )
