"""A private redis-server and project environment for the single-process benchmarks (mirror_capacity.py,
mirror_lag.py, redis_cost.py): a temp dir, the example tasks, WARNING logs, and the database they name."""

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent


def start(prefix: str, *, database_url: str = "", appendfsync: str = "always") -> tuple["RedisServer", dict[str, str]]:
    """Start a redis-server in a fresh temp dir and point this process (and the children given the returned
    environment) at it; returns the server (call .stop() when done) and that environment."""
    from tests.redis_server import RedisServer

    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    server = RedisServer(tmp / "redis", appendfsync=appendfsync).start()
    env = {**os.environ, "REDIS_URL": server.url, "JOBCONSOLE_VAR_DIR": str(tmp / "var"),
           "DJANGO_SETTINGS_MODULE": "project.settings", "JOBCONSOLE_TASK_MODULES": "jobconsole.examples",
           "LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT), "DEBUG": "false",
           "SECRET_KEY": os.environ.get("SECRET_KEY") or "bench-only-not-a-secret"}  # fmt: skip
    if database_url:
        env["DATABASE_URL"] = database_url
    os.environ.update(env)
    (tmp / "var").mkdir()
    return server, env
