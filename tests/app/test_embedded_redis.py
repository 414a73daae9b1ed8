"""`make run`'s embedded Redis: a stack uses the server it started, even when another stack starting at the same
moment took the port both found free (6388)."""

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.redis_server import RedisServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))  # as run_stack.py runs: its own folder
import run_stack
from stack.supervisor import Supervisor


def test_the_server_answering_a_port_is_told_by_its_process_id(redis_server: RedisServer) -> None:
    assert redis_server.proc is not None
    assert run_stack.embedded_redis.serving_pid(redis_server.port) == redis_server.proc.pid
    assert run_stack.embedded_redis.serving_pid(run_stack.embedded_redis.pick_port(default_first=False)) is None


def test_a_port_taken_by_another_server_meanwhile_makes_the_stack_start_its_own_on_another(
    redis_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = redis_server.port  # found free, then bound by the other stack's server before ours could bind it
    real_pick = run_stack.embedded_redis.pick_port
    monkeypatch.setattr(
        run_stack.embedded_redis,
        "pick_port",
        lambda *, default_first: taken if default_first else real_pick(default_first=False),
    )
    monkeypatch.setattr(run_stack, "VAR", tmp_path)
    env: dict[str, Any] = {}
    supervisor = Supervisor([], tmp_path, {})
    try:
        run_stack.start_redis(supervisor, env)
        [ours] = supervisor.services
        assert ours.proc is not None and ours.proc.poll() is None
        port = int(env["REDIS_URL"].rsplit(":", 1)[1].split("/")[0])
        assert port != taken and run_stack.embedded_redis.serving_pid(port) == ours.proc.pid
        assert (tmp_path / "redis.url").read_text().strip() == env["REDIS_URL"]
    finally:
        supervisor.stop_all()
